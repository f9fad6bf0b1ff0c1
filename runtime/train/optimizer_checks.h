// Helpers shared by the optimizers (internal to gpipe_train): validation of hyperparameters
// (messages name the plan field, e.g. "optimizer.sgd.lr must be > 0, got 0") and of the
// tensors handed to Optimizer::Step, and lazy allocation of per-parameter state.
#ifndef GPIPE_RUNTIME_TRAIN_OPTIMIZER_CHECKS_H_
#define GPIPE_RUNTIME_TRAIN_OPTIMIZER_CHECKS_H_

#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"

namespace gpipe::optimizer_internal {

// `field` > 0 (and finite).
absl::Status CheckPositive(const std::string& field, double value);
// `field` >= 0 (and finite).
absl::Status CheckNonNegative(const std::string& field, double value);
// `field` in [0, 1).
absl::Status CheckUnitInterval(const std::string& field, double value);

// The arguments of one Optimizer::Step: lr finite and >= 0, equally many values and gradients,
// each pair f32 of the same shape, and (once `state` exists: one tensor per
// parameter from the first call) the same number and shapes of parameters as on the first call.
// `optimizer` names the optimizer in messages ("sgd").
absl::Status CheckStepArguments(const char* optimizer, double lr, std::span<const Tensor> values,
                                std::span<const Tensor> grads, std::span<const Tensor> state);

// The arguments of Optimizer::Restore: one vector per state key (`keys`), all of one length
// (one tensor per parameter), empty when steps == 0 (state exists from the first Step);
// steps >= 0.
absl::Status CheckRestore(const char* optimizer, size_t keys, int64_t steps,
                          const std::vector<std::vector<Tensor>>& state);

// Replaces `state` with one zero-filled f32 buffer per value (same shape, on `device`),
// counted as kOptimizerState. On failure `state` is left unchanged.
absl::Status AllocateStateLike(Device& device, std::span<const Tensor> values,
                               std::vector<Tensor>& state);

}  // namespace gpipe::optimizer_internal

#endif  // GPIPE_RUNTIME_TRAIN_OPTIMIZER_CHECKS_H_
