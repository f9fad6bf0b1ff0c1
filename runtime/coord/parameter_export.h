// ExportParameters: every parameter and buffer of the job into one safetensors file, written by
// rank 0 (the `end` of the step protocol in worker.cc). Rank 0 checks the destination first and
// every rank learns the verdict; then every rank gathers its stage's tensors to rank 0 (kExport),
// which merges them, and every rank learns whether the file was written. With data parallelism
// each parameter arrives once per replica: replica 0's is written, and every other copy must
// equal it bit for bit, else the export fails naming the first difference. Collective.
#ifndef GPIPE_RUNTIME_COORD_PARAMETER_EXPORT_H_
#define GPIPE_RUNTIME_COORD_PARAMETER_EXPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/comm/control_channel.h"
#include "runtime/core/file_ownership.h"
#include "runtime/core/logger.h"
#include "runtime/exec/stage_chunks.h"

namespace gpipe {

// What the file's metadata records beside the tensors.
struct ExportMetadata {
  std::string plan_name;  // gpipe_plan
  int64_t steps = 0;      // gpipe_steps: training steps done
  std::string note;       // added to rank 0's "exported" line in parentheses (empty: nothing)
  // How the values are stored: F32, or BF16 (--export-dtype BF16; the f32 master weights
  // rounded to nearest even).
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  // --export-shard-bytes: above this many bytes of data the export is split into shards with an
  // index (safetensors_shards.h); 0: one file.
  int64_t shard_bytes = 0;
};

// `path` and `files` matter on rank 0 only: `path` is named `role` in messages and checked
// against the run's files (file_ownership.h); `timeout` bounds each exchange.
absl::Status ExportParameters(ControlChannel& control, const StageChunks& chunks,
                              const FileRole& path, const RunFiles& files,
                              const ExportMetadata& metadata, absl::Duration timeout,
                              const Logger& logger);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_PARAMETER_EXPORT_H_
