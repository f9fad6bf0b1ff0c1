#include "runtime/exec/bf16_layer.h"

#include <utility>

#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {
namespace {

LayerContext InBf16(const LayerContext& ctx) {
  LayerContext inner = ctx;
  inner.product_precision = ProductPrecision::kBF16;
  return inner;
}

}  // namespace

absl::StatusOr<Tensor> Bf16Layer::Rounded(Device& device, Tensor tensor) const {
  if (!tensor.defined() || tensor.dtype() != DType::kF32) return tensor;
  const TensorOps& ops = device.ops().tensor;
  ASSIGN_OR_RETURN(Tensor narrow,
                   Tensor::Empty(device, tensor.shape(), DType::kBF16, MemoryKind::kWorkspace));
  RETURN_IF_ERROR(ops.Cast(tensor, narrow));
  if (inner().OutputAliasesInput()) {
    // The storage may be the previous layer's (or the data set's): leave it alone.
    ASSIGN_OR_RETURN(Tensor wide,
                     Tensor::Empty(device, tensor.shape(), DType::kF32, tensor.memory_kind()));
    RETURN_IF_ERROR(ops.Cast(narrow, wide));
    return wide;
  }
  RETURN_IF_ERROR(ops.Cast(narrow, tensor));
  return tensor;
}

absl::StatusOr<Tensor> Bf16Layer::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                          const Tensor& x, SavedTensors& saved) const {
  ASSIGN_OR_RETURN(Tensor y, inner().Forward(InBf16(ctx), params, x, saved));
  return Rounded(ctx.device, std::move(y));
}

absl::StatusOr<Tensor> Bf16Layer::Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                           std::span<Tensor> grads, const SavedTensors& saved,
                                           const Tensor& dy) const {
  ASSIGN_OR_RETURN(Tensor dx, inner().Backward(InBf16(ctx), params, grads, saved, dy));
  return Rounded(ctx.device, std::move(dx));
}

absl::StatusOr<Tensor> Bf16Layer::BackwardInput(const LayerContext& ctx,
                                                std::span<const Tensor> params,
                                                const SavedTensors& saved, const Tensor& dy) const {
  ASSIGN_OR_RETURN(Tensor dx, inner_halves().BackwardInput(InBf16(ctx), params, saved, dy));
  return Rounded(ctx.device, std::move(dx));
}

absl::Status Bf16Layer::BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                                       const SavedTensors& saved, const Tensor& dy) const {
  return inner_halves().BackwardWeight(InBf16(ctx), grads, saved, dy);
}

}  // namespace gpipe
