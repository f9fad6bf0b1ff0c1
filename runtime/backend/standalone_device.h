// A device on its own, for tools that run outside a training job (gpipe-plan profile,
// gpipe-bench-kernels): no MPI, no data channel, no rank. CPU: the reference device with
// runtime.threads; CUDA: the first GPU this process sees (CUDA_VISIBLE_DEVICES picks it), with
// runtime.cuda's settings. SIM has no kernels to time: INVALID_ARGUMENT.
#ifndef GPIPE_RUNTIME_BACKEND_STANDALONE_DEVICE_H_
#define GPIPE_RUNTIME_BACKEND_STANDALONE_DEVICE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/plan.pb.h"
#include "runtime/device/device.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Device>> CreateStandaloneDevice(const pb::Runtime& runtime);

// "cpu" or "cuda" (any case), as tools' --device flags spell it; INVALID_ARGUMENT otherwise.
absl::StatusOr<pb::Device> StandaloneDeviceFromName(absl::string_view name);

// The devices beyond CPU, from whichever source CMake picks (cuda/cuda_standalone_device.cc
// where a CUDA compiler was found, no_cuda_standalone_device.cc otherwise).
absl::StatusOr<std::unique_ptr<Device>> CreateOptionalStandaloneDevice(const pb::Runtime& runtime);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_BACKEND_STANDALONE_DEVICE_H_
