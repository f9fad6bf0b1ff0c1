#include "layers/bf16_tensors.h"

#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {
namespace {

absl::StatusOr<Tensor> CastInto(Device& device, const Tensor& tensor, DType dtype,
                                MemoryKind kind) {
  ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(device, tensor.shape(), dtype, kind));
  RETURN_IF_ERROR(device.ops().tensor.Cast(tensor, out));
  return out;
}

}  // namespace

absl::StatusOr<Tensor> WidenedFromBf16(Device& device, const Tensor& tensor, MemoryKind kind) {
  if (!tensor.defined() || tensor.dtype() != DType::kBF16) return tensor;
  return CastInto(device, tensor, DType::kF32, kind);
}

absl::StatusOr<Tensor> NarrowedToBf16(Device& device, const Tensor& tensor, MemoryKind kind) {
  if (!tensor.defined() || tensor.dtype() != DType::kF32) return tensor;
  return CastInto(device, tensor, DType::kBF16, kind);
}

DType AttentionOperandDType(const LayerContext& ctx) {
  return ctx.product_precision == ProductPrecision::kBF16 &&
                 ctx.saved_activation_dtype == DType::kBF16
             ? DType::kBF16
             : DType::kF32;
}

absl::StatusOr<Tensor> StoredActivation(const LayerContext& ctx, const Tensor& tensor) {
  if (ctx.saved_activation_dtype != DType::kBF16) return tensor;
  return NarrowedToBf16(ctx.device, tensor, MemoryKind::kActivation);
}

}  // namespace gpipe
