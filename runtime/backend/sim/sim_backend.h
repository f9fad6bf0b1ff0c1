// The SIM backend: a SimDevice (shape-only tensors whose ops compute nothing, memory counted as
// on a real device); layers, loss and optimizer wrapped in stand-ins that wait for their
// modelled time (runtime.sim's cost table); the data set read shape-only; a headers-only MPI
// channel whose transfers and all-reduces take the link model's time.
#ifndef GPIPE_RUNTIME_BACKEND_SIM_SIM_BACKEND_H_
#define GPIPE_RUNTIME_BACKEND_SIM_SIM_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/backend/backend.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Backend>> CreateSimBackend(const pb::Runtime& runtime,
                                                          const BackendContext& context);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_BACKEND_SIM_SIM_BACKEND_H_
