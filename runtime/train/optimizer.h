// Optimizer: applies one update to a stage's parameters from their accumulated gradients,
// following PyTorch's update rules exactly (torch.optim.SGD, Adam, AdamW), so hyperparameters
// carry over unchanged. State (momentum, moments) is allocated on the first Step, per parameter
// index, on the parameter's allocator, counted as MemoryKind::kOptimizerState.
#ifndef GPIPE_RUNTIME_TRAIN_OPTIMIZER_H_
#define GPIPE_RUNTIME_TRAIN_OPTIMIZER_H_

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"

namespace gpipe {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // values[i] -= update(grads[i]) with learning rate `lr`, computed by `device` (which holds
  // the tensors) through its Ops. The spans are the same length and order on every call (the
  // stage's parameters). Gradients are not modified.
  virtual absl::Status Step(Device& device, double lr, std::span<Tensor> values,
                            std::span<const Tensor> grads) = 0;
  // The plan's learning rate (the coordinator sends it in each StepCommand).
  virtual double base_lr() const = 0;
  // Number of Step calls so far.
  virtual int64_t steps() const = 0;

  // For checkpoints (optimizer_state_io.h). The names of the state tensors kept per parameter,
  // PyTorch's keys: {"momentum_buffer"} for SGD with momentum, {"exp_avg", "exp_avg_sq"} for
  // Adam and AdamW, none for plain SGD.
  virtual std::vector<std::string> StateKeys() const = 0;
  // The state tensors of StateKeys()[key], one per parameter in Step's order; empty before the
  // first Step.
  virtual std::span<const Tensor> State(int key) const = 0;
  // Continues after `steps` Step calls with `state` (one vector per key, one tensor per parameter,
  // on the parameters' device; all empty when steps == 0). INVALID_ARGUMENT when the counts do
  // not match StateKeys(); nothing changes then.
  virtual absl::Status Restore(int64_t steps, std::vector<std::vector<Tensor>> state) = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_TRAIN_OPTIMIZER_H_
