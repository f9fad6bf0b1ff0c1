// SgdOptimizer: torch.optim.SGD's update rule (L2 weight decay, momentum with dampening,
// Nesterov). The momentum buffer of each parameter is allocated on the first Step and starts as
// that step's (decayed) gradient, as in PyTorch. Not thread-safe.
#ifndef GPIPE_RUNTIME_TRAIN_SGD_H_
#define GPIPE_RUNTIME_TRAIN_SGD_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/core/tensor.h"
#include "runtime/train/optimizer.h"

namespace gpipe {

class SgdOptimizer final : public Optimizer {
 public:
  // INVALID_ARGUMENT naming the field ("optimizer.sgd.lr must be > 0, got 0") when lr <= 0,
  // momentum, dampening or weight_decay < 0, or nesterov without momentum > 0 and dampening 0.
  static absl::StatusOr<std::unique_ptr<SgdOptimizer>> Create(const pb::Sgd& spec);

  absl::Status Step(Device& device, double lr, std::span<Tensor> values,
                    std::span<const Tensor> grads) override;
  double base_lr() const override { return spec_.lr(); }
  int64_t steps() const override { return steps_; }
  std::vector<std::string> StateKeys() const override;
  std::span<const Tensor> State(int /*key*/) const override { return momentum_buffers_; }
  absl::Status Restore(int64_t steps, std::vector<std::vector<Tensor>> state) override;

 private:
  explicit SgdOptimizer(const pb::Sgd& spec) : spec_(spec) {}

  pb::Sgd spec_;
  int64_t steps_ = 0;
  // One buffer per parameter position when momentum != 0; empty before the first Step.
  std::vector<Tensor> momentum_buffers_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_TRAIN_SGD_H_
