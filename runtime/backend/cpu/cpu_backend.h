// The CPU backend: a CpuDevice (oneDNN, runtime.threads compute threads, runtime
// memory_limit_bytes), the data set as opened, an MpiDataChannel moving payloads, chunks as
// built.
#ifndef GPIPE_RUNTIME_BACKEND_CPU_CPU_BACKEND_H_
#define GPIPE_RUNTIME_BACKEND_CPU_CPU_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/backend/backend.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const pb::Runtime& runtime,
                                                          const BackendContext& context);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_BACKEND_CPU_CPU_BACKEND_H_
