// A checkpoint's manifest (proto/checkpoint.proto) on disk: DIR/step-N/manifest.pbtxt, protobuf
// text. Reading is strict and checks the manifest's own consistency (format version, shard
// names, tensor entries); the shards it lists are checked when they are read
// (checkpoint_reader.h).
#ifndef GPIPE_RUNTIME_CKPT_CHECKPOINT_MANIFEST_H_
#define GPIPE_RUNTIME_CKPT_CHECKPOINT_MANIFEST_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"

namespace gpipe {

inline constexpr int kCheckpointFormatVersion = 1;

// Parses `text` (named `source` in messages) strictly: unknown fields are errors, each reported
// as "source:line:col: message"; then checks manifest_crc32 and ValidateCheckpointManifest.
// DATA_LOSS "<source> is empty (...)" for empty text, "<source>: the manifest's checksum does not
// match its text (...)" when manifest_crc32 is present and wrong. A manifest without
// manifest_crc32 (written by an earlier gpipe) is accepted. The manifest is returned with
// manifest_crc32 cleared: it describes the text, not the checkpoint.
absl::StatusOr<pb::CheckpointManifest> ParseCheckpointManifest(const std::string& text,
                                                               const std::string& source);
// Reads and parses `checkpoint`/manifest.pbtxt. Also DATA_LOSS naming both when `checkpoint` is
// named step-N and the manifest says another step (a directory with another name, e.g. a user's
// copy, is read as it is); FAILED_PRECONDITION for a symlink loop on the way.
absl::StatusOr<pb::CheckpointManifest> ReadCheckpointManifest(const std::string& checkpoint);
// Writes `checkpoint`/manifest.pbtxt atomically and durably, with its manifest_crc32 set (any
// value `manifest` holds there is replaced).
absl::Status WriteCheckpointManifest(const std::string& checkpoint,
                                     const pb::CheckpointManifest& manifest);

// The CRC-32 of `manifest`'s text as TextFormat prints it with manifest_crc32 cleared.
absl::StatusOr<uint32_t> CheckpointManifestChecksum(const pb::CheckpointManifest& manifest);

// DATA_LOSS naming `source` and the entry unless: format_version is 1; step >= 0 and
// 0 <= applied_steps <= step; every shard a plain file name ending in .safetensors, listed once,
// with bytes >= 0; every tensor named once, of a known kind, in a listed shard, with
// non-negative dimensions whose product fits in 2^62 bytes.
absl::Status ValidateCheckpointManifest(const pb::CheckpointManifest& manifest,
                                        const std::string& source);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_CHECKPOINT_MANIFEST_H_
