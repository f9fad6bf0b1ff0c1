// Whole-file reads for the loaders (npy, safetensors, checkpoints): one allocation of the file's
// size; and whole-file durable, atomic writes for every output (exports, checkpoints, traces).
#ifndef GPIPE_RUNTIME_CORE_FILE_IO_H_
#define GPIPE_RUNTIME_CORE_FILE_IO_H_

#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpipe {

// The file's bytes. NOT_FOUND naming the path when it cannot be opened; FAILED_PRECONDITION when
// it is not a regular file (a directory, device, FIFO or socket); DATA_LOSS when the read fails
// part-way or the file changes size meanwhile.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Writes the concatenation of `pieces` to `path` so that a crash at any moment leaves either the
// old file or the complete new one: a temporary file in the same directory (mode 0644) is
// written, fsynced and renamed over `path`, then the directory is fsynced. A symbolic link is
// followed (its target is replaced, the link kept). Only a regular file is ever replaced:
// FAILED_PRECONDITION naming the path when it is a directory, device, FIFO or socket. DATA_LOSS
// naming the path and the failing step (with errno's text) otherwise; the temporary file is
// removed on every failure.
absl::Status WriteFileAtomically(const std::string& path,
                                 std::span<const absl::string_view> pieces);
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// fsync of a directory, so that renames and removals in it are durable. DATA_LOSS on failure.
absl::Status FsyncDirectory(const std::string& dir);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_FILE_IO_H_
