// Bf16Loss: a loss under bf16 mixed precision (training.precision: BF16). The last layer's output
// comes as a bf16 tensor (see Bf16Layer); the loss computes in f32 on an exact f32 copy that lives
// for the call, and its gradient stays f32. Everything else is the inner loss's.
// Thread-compatible.
#ifndef GPIPE_RUNTIME_EXEC_BF16_LOSS_H_
#define GPIPE_RUNTIME_EXEC_BF16_LOSS_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "layers/loss.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"

namespace gpipe {

class Bf16Loss final : public Loss {
 public:
  explicit Bf16Loss(std::unique_ptr<Loss> inner) : inner_(std::move(inner)) {}

  std::string_view type() const override { return inner_->type(); }
  DType target_dtype() const override { return inner_->target_dtype(); }
  Shape target_shape(const Shape& output_shape) const override {
    return inner_->target_shape(output_shape);
  }
  absl::Status ValidateOutputShape(const Shape& output_shape) const override {
    return inner_->ValidateOutputShape(output_shape);
  }
  absl::StatusOr<Tensor> Compute(Device& device, const Tensor& output, const Tensor& targets,
                                 int64_t global_batch, Tensor& totals) const override;
  absl::Status CheckHostTargets(const Shape& output_shape, const Tensor& targets) const override {
    return inner_->CheckHostTargets(output_shape, targets);
  }
  bool counts_correct() const override { return inner_->counts_correct(); }

 private:
  std::unique_ptr<Loss> inner_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_BF16_LOSS_H_
