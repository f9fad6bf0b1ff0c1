// CheckStageMemory: a backend's start-up refusal of a stage that cannot fit its device, from the
// memory rank 0 predicts for it (Setup.predicted_memory), before anything is allocated: a plan
// with absurd sizes fails at once, naming the rank, stage and sizes, instead of swapping the
// host to death or dying in the allocator part-way through a step.
#ifndef GPIPE_RUNTIME_BACKEND_STAGE_MEMORY_CHECK_H_
#define GPIPE_RUNTIME_BACKEND_STAGE_MEMORY_CHECK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/control.pb.h"

namespace gpipe {

// RESOURCE_EXHAUSTED when the predicted parameter and activation bytes together exceed
// `capacity_bytes`, the whole memory of the device (`device` describes it: "the host's memory");
// OK when the setup carries no prediction or capacity_bytes <= 0 (unknown).
absl::Status CheckStageMemory(const pb::Setup& setup, int64_t capacity_bytes,
                              absl::string_view device);

// The host's physical memory in bytes (0 when unknown).
int64_t HostMemoryBytes();

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_BACKEND_STAGE_MEMORY_CHECK_H_
