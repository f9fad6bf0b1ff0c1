// AdamOptimizer: torch.optim.Adam (weight decay added to the gradient, L2) and torch.optim.AdamW
// (decoupled weight decay: p *= 1 - lr * wd before the Adam update). Moments are allocated on
// the first Step; bias corrections use the number of steps taken, as PyTorch's per-parameter
// step counter does when every parameter is updated every step. No amsgrad. Not thread-safe.
#ifndef GPIPE_RUNTIME_TRAIN_ADAM_H_
#define GPIPE_RUNTIME_TRAIN_ADAM_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/core/tensor.h"
#include "runtime/train/optimizer.h"

namespace gpipe {

struct AdamHyperparameters {
  double lr = 0.001;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  // false: Adam (L2 added to the gradient); true: AdamW (decoupled).
  bool decoupled_weight_decay = false;
  // AdamW's decay_only_matrices: parameters of rank < 2 (biases, norm weights) are not decayed.
  bool decay_only_matrices = false;
};

class AdamOptimizer final : public Optimizer {
 public:
  // INVALID_ARGUMENT naming the field ("optimizer.adam.beta2 must be in [0, 1), got 1") when
  // lr <= 0, a beta outside [0, 1), eps < 0 or weight_decay < 0.
  static absl::StatusOr<std::unique_ptr<AdamOptimizer>> Create(const pb::Adam& spec);
  static absl::StatusOr<std::unique_ptr<AdamOptimizer>> Create(const pb::AdamW& spec);

  absl::Status Step(Device& device, double lr, std::span<Tensor> values,
                    std::span<const Tensor> grads) override;
  double base_lr() const override { return hyper_.lr; }
  int64_t steps() const override { return steps_; }
  std::vector<std::string> StateKeys() const override { return {"exp_avg", "exp_avg_sq"}; }
  std::span<const Tensor> State(int key) const override {
    return key == 0 ? exp_avg_ : exp_avg_sq_;
  }
  absl::Status Restore(int64_t steps, std::vector<std::vector<Tensor>> state) override;

 private:
  explicit AdamOptimizer(const AdamHyperparameters& hyper) : hyper_(hyper) {}
  // `field_prefix`: "optimizer.adam" or "optimizer.adamw".
  static absl::StatusOr<std::unique_ptr<AdamOptimizer>> CreateChecked(
      const AdamHyperparameters& hyper, const std::string& field_prefix);

  AdamHyperparameters hyper_;
  int64_t steps_ = 0;
  // First and second moments per parameter position; empty before the first Step.
  std::vector<Tensor> exp_avg_;
  std::vector<Tensor> exp_avg_sq_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_TRAIN_ADAM_H_
