// SimLoss: the plan's loss as a simulated device runs it: the real loss's target shape and
// checks, a shape-only gradient of the output's shape, a loss of 0 (there are no values, so totals
// are untouched), and runtime.sim.loss_us of device time per call. Thread-compatible.
#ifndef GPIPE_RUNTIME_BACKEND_SIM_SIM_LOSS_H_
#define GPIPE_RUNTIME_BACKEND_SIM_SIM_LOSS_H_

#include <memory>

#include "absl/time/time.h"
#include "layers/loss.h"
#include "runtime/device/sim/sim_device.h"

namespace gpipe {

class SimLoss final : public Loss {
 public:
  // `device` must outlive the loss.
  SimLoss(std::unique_ptr<Loss> real, SimDevice& device, absl::Duration time)
      : real_(std::move(real)), device_(device), time_(time) {}

  std::string_view type() const override { return real_->type(); }
  DType target_dtype() const override { return real_->target_dtype(); }
  Shape target_shape(const Shape& output_shape) const override {
    return real_->target_shape(output_shape);
  }
  absl::Status ValidateOutputShape(const Shape& output_shape) const override {
    return real_->ValidateOutputShape(output_shape);
  }
  // Adds nothing to `totals` (there are no values); returns a shape-only grad like `output`.
  absl::StatusOr<Tensor> Compute(Device& device, const Tensor& output, const Tensor& targets,
                                 int64_t global_batch, Tensor& totals) const override;
  // Nothing to count.
  bool counts_correct() const override { return false; }

 private:
  std::unique_ptr<Loss> real_;
  SimDevice& device_;
  absl::Duration time_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_BACKEND_SIM_SIM_LOSS_H_
