#include "runtime/exec/bf16_layer.h"

#include <utility>

#include "layers/bf16_tensors.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {
namespace {

LayerContext InBf16(const LayerContext& ctx) {
  LayerContext inner = ctx;
  inner.product_precision = ProductPrecision::kBF16;
  inner.saved_activation_dtype = DType::kBF16;
  // Its output and input gradient are rounded to bf16 here anyway: a layer may write them so.
  inner.bf16_output = true;
  inner.bf16_input_grad = true;
  return inner;
}

// Whether `entry` is the whole of `tensor` (the same storage and elements, any shape).
bool IsWholeOf(const Tensor& entry, const Tensor& tensor) {
  return entry.defined() && tensor.defined() && entry.SharesStorageWith(tensor) &&
         entry.dtype() == tensor.dtype() && entry.num_elements() == tensor.num_elements();
}

}  // namespace

absl::StatusOr<SavedTensors> Bf16Layer::Widened(Device& device, const SavedTensors& saved) const {
  if (inner().TakesBf16Saved()) return saved;  // it widens what it needs itself, or needs none
  SavedTensors wide;
  wide.tensors.reserve(saved.tensors.size());
  for (const Tensor& entry : saved.tensors) {
    ASSIGN_OR_RETURN(wide.tensors.emplace_back(),
                     WidenedFromBf16(device, entry, MemoryKind::kWorkspace));
  }
  return wide;
}

// The inner layer runs on an f32 copy of a bf16 input. Its f32 output is rounded into a bf16
// tensor, or, when it is a view of the input (flatten), becomes the same view of the bf16 input.
// Saved entries that are the whole f32 input or output become the bf16 tensors: the same values
// (the output's rounded, as the next layer sees them). An entry the inner layer made some other
// way stays as it is; should one be part of the output, the output is rounded in place first.
absl::StatusOr<Tensor> Bf16Layer::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                          const Tensor& x, SavedTensors& saved) const {
  // A layer that hands its input only to products takes it as it is (TakesBf16Inputs).
  Tensor wide_x = x;
  if (!inner().TakesBf16Inputs()) {
    ASSIGN_OR_RETURN(wide_x, WidenedFromBf16(ctx.device, x, MemoryKind::kWorkspace));
  }
  ASSIGN_OR_RETURN(Tensor wide_y, inner().Forward(InBf16(ctx), params, wide_x, saved));
  // An output the inner layer wrote as bf16 itself (LayerContext::bf16_output, or an activation
  // of a bf16 input) is the output as it is.
  const bool rounded = wide_y.dtype() != DType::kF32;
  const bool y_views_x = !rounded && wide_y.SharesStorageWith(wide_x);
  Tensor y = wide_y;
  if (y_views_x && x.dtype() == DType::kBF16) {
    ASSIGN_OR_RETURN(y, x.Reshaped(wide_y.shape()));
  } else if (!rounded) {
    ASSIGN_OR_RETURN(y, NarrowedToBf16(ctx.device, wide_y, MemoryKind::kActivation));
  }
  const bool y_is_new = !rounded && !y_views_x;
  bool saves_part_of_y = false;
  for (Tensor& entry : saved.tensors) {
    if (x.dtype() == DType::kBF16 && IsWholeOf(entry, wide_x)) {
      ASSIGN_OR_RETURN(entry, x.Reshaped(entry.shape()));
    } else if (y_is_new && IsWholeOf(entry, wide_y)) {
      ASSIGN_OR_RETURN(entry, y.Reshaped(entry.shape()));
    } else if (y_is_new && entry.defined() && entry.SharesStorageWith(wide_y)) {
      saves_part_of_y = true;
    }
  }
  if (saves_part_of_y) RETURN_IF_ERROR(ctx.device.ops().tensor.Cast(y, wide_y));
  return y;
}

absl::StatusOr<Tensor> Bf16Layer::OutputGrad(Device& device, const Tensor& dy) const {
  if (inner().TakesBf16OutputGrads()) return dy;  // its products and sums read it as it is
  return WidenedFromBf16(device, dy, MemoryKind::kWorkspace);
}

absl::StatusOr<Tensor> Bf16Layer::Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                           std::span<Tensor> grads, const SavedTensors& saved,
                                           const Tensor& dy) const {
  ASSIGN_OR_RETURN(const Tensor wide_dy, OutputGrad(ctx.device, dy));
  ASSIGN_OR_RETURN(const SavedTensors wide_saved, Widened(ctx.device, saved));
  ASSIGN_OR_RETURN(const Tensor dx,
                   inner().Backward(InBf16(ctx), params, grads, wide_saved, wide_dy));
  return NarrowedToBf16(ctx.device, dx, MemoryKind::kActivation);
}

absl::StatusOr<Tensor> Bf16Layer::BackwardInput(const LayerContext& ctx,
                                                std::span<const Tensor> params,
                                                const SavedTensors& saved, const Tensor& dy) const {
  ASSIGN_OR_RETURN(const Tensor wide_dy, OutputGrad(ctx.device, dy));
  ASSIGN_OR_RETURN(const SavedTensors wide_saved, Widened(ctx.device, saved));
  ASSIGN_OR_RETURN(const Tensor dx,
                   inner_halves().BackwardInput(InBf16(ctx), params, wide_saved, wide_dy));
  return NarrowedToBf16(ctx.device, dx, MemoryKind::kActivation);
}

absl::Status Bf16Layer::BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                                       const SavedTensors& saved, const Tensor& dy) const {
  ASSIGN_OR_RETURN(const Tensor wide_dy, OutputGrad(ctx.device, dy));
  ASSIGN_OR_RETURN(const SavedTensors wide_saved, Widened(ctx.device, saved));
  return inner_halves().BackwardWeight(InBf16(ctx), grads, wide_saved, wide_dy);
}

absl::StatusOr<Tensor> Bf16Layer::ForwardJoin(const LayerContext& ctx, const Tensor& x,
                                              const Tensor& skip, SavedTensors& saved) const {
  ASSIGN_OR_RETURN(const Tensor wide_x, WidenedFromBf16(ctx.device, x, MemoryKind::kWorkspace));
  ASSIGN_OR_RETURN(const Tensor wide_skip,
                   WidenedFromBf16(ctx.device, skip, MemoryKind::kWorkspace));
  ASSIGN_OR_RETURN(const Tensor wide_y,
                   inner_join().ForwardJoin(InBf16(ctx), wide_x, wide_skip, saved));
  return NarrowedToBf16(ctx.device, wide_y, MemoryKind::kActivation);
}

absl::StatusOr<SkipJoin::Grads> Bf16Layer::BackwardJoin(const LayerContext& ctx,
                                                        const SavedTensors& saved,
                                                        const Tensor& dy) const {
  ASSIGN_OR_RETURN(const Tensor wide_dy, WidenedFromBf16(ctx.device, dy, MemoryKind::kWorkspace));
  ASSIGN_OR_RETURN(const Grads wide, inner_join().BackwardJoin(InBf16(ctx), saved, wide_dy));
  Grads grads;
  ASSIGN_OR_RETURN(grads.dx, NarrowedToBf16(ctx.device, wide.dx, MemoryKind::kActivation));
  ASSIGN_OR_RETURN(grads.dskip, NarrowedToBf16(ctx.device, wide.dskip, MemoryKind::kActivation));
  return grads;
}

}  // namespace gpipe
