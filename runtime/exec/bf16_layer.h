// Bf16Layer: a layer run in bf16 mixed precision (training.precision: BF16). It takes and
// produces bf16 tensors: its output and its input gradient are bf16 tensors (rounded to nearest
// even), and what the inner layer saves of its input or its output for backward is kept as the
// bf16 tensor (half the bytes). It also takes f32 inputs (the data set's) and f32 output gradients
// (the loss's). The inner layer computes in f32 on exact f32 copies that live for one call (a
// layer that only hands its input to products, Layer::TakesBf16Inputs, gets the bf16 input and
// saved inputs themselves, which the products read as they are; an element-wise activation takes
// and gives bf16 itself, Layer::KeepsBf16; a linear gets a bf16 output gradient as it is,
// Layer::TakesBf16OutputGrads: all the same bits as on the f32 copies), its
// matrix products and convolutions rounding their operands to bf16 and accumulating in f32
// (LayerContext::product_precision); norms, pooling and softmax compute in f32. A composite inner
// layer keeps the activations it saves inside (its inner layers' outputs, attention's qkv and O)
// as bf16 too (LayerContext::saved_activation_dtype); statistics and masks stay as it made them.
// Parameters, their gradients and the optimizer stay f32 (the master weights). Because every
// activation and input gradient is a bf16 value, a boundary tensor travels as bf16 losslessly and
// pipelines of any stage count compute the same bits. Everything else is the inner layer's
// (LayerDecorator). Thread-compatible.
#ifndef GPIPE_RUNTIME_EXEC_BF16_LAYER_H_
#define GPIPE_RUNTIME_EXEC_BF16_LAYER_H_

#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "layers/layer.h"
#include "layers/layer_decorator.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"

namespace gpipe {

class Bf16Layer final : public LayerDecorator {
 public:
  explicit Bf16Layer(std::unique_ptr<Layer> inner) : LayerDecorator(std::move(inner)) {}

  DType output_dtype() const override { return DType::kBF16; }
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  absl::StatusOr<Tensor> BackwardInput(const LayerContext& ctx, std::span<const Tensor> params,
                                       const SavedTensors& saved, const Tensor& dy) const override;
  absl::Status BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                              const SavedTensors& saved, const Tensor& dy) const override;
  // A skip join: both inputs widened, the output and both input gradients rounded to bf16.
  absl::StatusOr<Tensor> ForwardJoin(const LayerContext& ctx, const Tensor& x, const Tensor& skip,
                                     SavedTensors& saved) const override;
  absl::StatusOr<Grads> BackwardJoin(const LayerContext& ctx, const SavedTensors& saved,
                                     const Tensor& dy) const override;

 private:
  // `saved` with every bf16 entry replaced by an f32 copy that lives for one call; as it is for
  // an inner layer that takes bf16 saved tensors (Layer::TakesBf16Saved: one that takes bf16
  // inputs, a composite that widens per inner layer).
  absl::StatusOr<SavedTensors> Widened(Device& device, const SavedTensors& saved) const;
  // The output gradient the inner layer's backward calls get: `dy` as it is for one that takes
  // bf16 output gradients (Layer::TakesBf16OutputGrads), else its exact f32 copy for the call.
  absl::StatusOr<Tensor> OutputGrad(Device& device, const Tensor& dy) const;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_BF16_LAYER_H_
