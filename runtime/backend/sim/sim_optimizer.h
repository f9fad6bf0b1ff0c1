// SimOptimizer: the plan's optimizer as a simulated device runs it. It keeps the real one (its
// learning rate and hyperparameter checks) but updates nothing: on the first Step it allocates
// the state the real rule would (state_per_parameter tensors shaped like each parameter, as
// kOptimizerState: 1 for SGD with momentum, 0 without, 2 for Adam and AdamW), so memory
// accounting matches, and every Step occupies the device for runtime.sim.optimizer_us.
// Not thread-safe.
#ifndef GPIPE_RUNTIME_BACKEND_SIM_SIM_OPTIMIZER_H_
#define GPIPE_RUNTIME_BACKEND_SIM_SIM_OPTIMIZER_H_

#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "proto/plan.pb.h"
#include "runtime/device/sim/sim_device.h"
#include "runtime/train/optimizer.h"

namespace gpipe {

// State tensors per parameter that the plan's optimizer keeps.
int OptimizerStatePerParameter(const pb::Optimizer& spec);

class SimOptimizer final : public Optimizer {
 public:
  SimOptimizer(std::unique_ptr<Optimizer> real, SimDevice& device, int state_per_parameter,
               absl::Duration time)
      : real_(std::move(real)),
        device_(device),
        state_per_parameter_(state_per_parameter),
        time_(time) {}

  absl::Status Step(Device& device, double lr, std::span<Tensor> values,
                    std::span<const Tensor> grads) override;
  double base_lr() const override { return real_->base_lr(); }
  int64_t steps() const override { return steps_; }
  // A simulated device holds no values: there is no state to save, and restoring only counts.
  std::vector<std::string> StateKeys() const override { return {}; }
  std::span<const Tensor> State(int /*key*/) const override { return {}; }
  absl::Status Restore(int64_t steps, std::vector<std::vector<Tensor>> state) override;

 private:
  std::unique_ptr<Optimizer> real_;
  SimDevice& device_;
  int state_per_parameter_;
  absl::Duration time_;
  int64_t steps_ = 0;
  std::vector<Tensor> state_;  // empty before the first Step
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_BACKEND_SIM_SIM_OPTIMIZER_H_
