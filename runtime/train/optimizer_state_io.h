// An optimizer's state as named host tensors, for checkpoints: parameter `p`'s state of key `k`
// is "p:k" (PyTorch's keys: "fc1.weight:exp_avg"), so it follows its parameter to whichever stage
// holds it when a checkpoint resumes under another partition.
#ifndef GPIPE_RUNTIME_TRAIN_OPTIMIZER_STATE_IO_H_
#define GPIPE_RUNTIME_TRAIN_OPTIMIZER_STATE_IO_H_

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/core/element_range.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"
#include "runtime/train/optimizer.h"

namespace gpipe {

// "p:k" for every parameter name p of `names` and key k of the optimizer, parameter-major.
std::vector<std::string> OptimizerStateNames(const Optimizer& optimizer,
                                             std::span<const std::string> names);

// One state tensor of a checkpoint: a whole one ("fc1.weight:exp_avg" of its parameter's shape),
// or, under training.shard_optimizer_state, the part `part` of one, as a 1-D tensor.
struct ExportedState {
  NamedTensorData tensor;
  std::vector<int64_t> whole_shape;
  std::optional<ElementRange> part;
};

// Host copies of the optimizer's state (none before its first Step), named as above, parameter-
// major. `names`, `values`: the parameters in Step's order. `parts`: empty, or (a
// ShardedOptimizer's) the part of each parameter whose state the optimizer keeps, in which case
// an empty part has none.
absl::StatusOr<std::vector<ExportedState>> ExportOptimizerState(
    Device& device, const Optimizer& optimizer, std::span<const std::string> names,
    std::span<const Tensor> values, std::span<const ElementRange> parts = {});

// Restores the optimizer to `steps` Step calls with state read from `tensors` by name (none read
// when steps == 0), allocated on `device` like `values`: whole tensors, or with `parts` (as
// above) each parameter's part of them (undefined for an empty part). NOT_FOUND /
// INVALID_ARGUMENT naming the tensor when one is missing or has another shape than its parameter;
// nothing changes then.
absl::Status ImportOptimizerState(
    Device& device, Optimizer& optimizer, int64_t steps, std::span<const std::string> names,
    std::span<const Tensor> values,
    const absl::flat_hash_map<std::string, const NamedTensorData*>& tensors,
    std::span<const ElementRange> parts = {});

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_TRAIN_OPTIMIZER_STATE_IO_H_
