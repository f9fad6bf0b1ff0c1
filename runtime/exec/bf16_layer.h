// Bf16Layer: a layer run in bf16 mixed precision (training.precision: BF16). Its matrix
// products and convolutions round their inputs to bf16 and accumulate in f32
// (LayerContext::product_precision); its output and its input gradient are rounded to bf16
// values (kept in f32 tensors), as a bf16 activation would be. Parameters, their gradients and
// the optimizer stay f32 (the master weights). Because every layer's output and input gradient
// is already a bf16 value, a boundary tensor sent as bf16 loses nothing: pipelines of any stage
// count compute the same bits. Norms, softmax, pooling and losses compute in f32 on those
// values. Everything else is the inner layer's (LayerDecorator). Thread-compatible.
#ifndef GPIPE_RUNTIME_EXEC_BF16_LAYER_H_
#define GPIPE_RUNTIME_EXEC_BF16_LAYER_H_

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/layer.h"
#include "layers/layer_decorator.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"

namespace gpipe {

class Bf16Layer final : public LayerDecorator {
 public:
  explicit Bf16Layer(std::unique_ptr<Layer> inner) : LayerDecorator(std::move(inner)) {}

  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  absl::StatusOr<Tensor> BackwardInput(const LayerContext& ctx, std::span<const Tensor> params,
                                       const SavedTensors& saved, const Tensor& dy) const override;
  absl::Status BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                              const SavedTensors& saved, const Tensor& dy) const override;

 private:
  // `tensor` (f32) with its elements rounded to bf16 (nearest even): in place, or into a new
  // tensor when the inner layer's output may share the input's storage. Other dtypes and
  // undefined tensors pass through.
  absl::StatusOr<Tensor> Rounded(Device& device, Tensor tensor) const;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_BF16_LAYER_H_
