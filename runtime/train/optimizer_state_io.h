// An optimizer's state as named host tensors, for checkpoints: parameter `p`'s state of key `k`
// is "p:k" (PyTorch's keys: "fc1.weight:exp_avg"), so it follows its parameter to whichever stage
// holds it when a checkpoint resumes under another partition.
#ifndef GPIPE_RUNTIME_TRAIN_OPTIMIZER_STATE_IO_H_
#define GPIPE_RUNTIME_TRAIN_OPTIMIZER_STATE_IO_H_

#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"
#include "runtime/train/optimizer.h"

namespace gpipe {

// "p:k" for every parameter name p of `names` and key k of the optimizer, parameter-major.
std::vector<std::string> OptimizerStateNames(const Optimizer& optimizer,
                                             std::span<const std::string> names);

// Host copies of the optimizer's state (none before its first Step), named as above. `names`:
// the parameters' names in Step's order.
absl::StatusOr<std::vector<NamedTensorData>> ExportOptimizerState(
    Device& device, const Optimizer& optimizer, std::span<const std::string> names);

// Restores the optimizer to `steps` Step calls with state read from `tensors` by name (none read
// when steps == 0), allocated on `device` like `values`. NOT_FOUND / INVALID_ARGUMENT naming the
// tensor when one is missing or has another shape than its parameter; nothing changes then.
absl::Status ImportOptimizerState(
    Device& device, Optimizer& optimizer, int64_t steps, std::span<const std::string> names,
    std::span<const Tensor> values,
    const absl::flat_hash_map<std::string, const NamedTensorData*>& tensors);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_TRAIN_OPTIMIZER_STATE_IO_H_
