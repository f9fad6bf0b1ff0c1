#include "layers/skip_add.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {

absl::Status JoinCalledAlone(const Layer& layer) {
  return absl::FailedPreconditionError(
      absl::StrCat(std::string(layer.type()), " '", layer.name(), "' joins the output of '",
                   layer.skip_join()->skip_from(),
                   "': the runtime calls ForwardJoin and BackwardJoin, not Forward and Backward"));
}

absl::Status CheckJoinOperand(const Layer& layer, const char* what, const Tensor& t,
                              const Shape& sample, int64_t batch) {
  if (!t.defined() || t.dtype() != DType::kF32 || t.shape().rank() < 1 ||
      t.shape().WithoutBatch() != sample || (batch >= 0 && t.shape().dim(0) != batch)) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(layer.type()), " '", layer.name(), "': ", what,
        " should be f32 samples of shape ", sample.ToString(),
        batch >= 0 ? absl::StrCat(" (", batch, " of them)") : "", ", got ", t.DebugString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Layer>> SkipAdd::Create(const pb::Layer& spec,
                                                       const Shape& input_shape,
                                                       const Shape& skip_shape) {
  if (input_shape != skip_shape) {
    return absl::InvalidArgumentError(
        absl::StrCat("adds the output of '", spec.skip_add().from(), "' ", skip_shape.ToString(),
                     " to its input ", input_shape.ToString(),
                     "; the shapes must be equal (skip_concat joins different ones)"));
  }
  return std::unique_ptr<Layer>(new SkipAdd(spec.name(), spec.skip_add().from(), input_shape));
}

absl::StatusOr<Tensor> SkipAdd::Forward(const LayerContext&, std::span<const Tensor>, const Tensor&,
                                        SavedTensors&) const {
  return JoinCalledAlone(*this);
}

absl::StatusOr<Tensor> SkipAdd::Backward(const LayerContext&, std::span<const Tensor>,
                                         std::span<Tensor>, const SavedTensors&,
                                         const Tensor&) const {
  return JoinCalledAlone(*this);
}

absl::StatusOr<Tensor> SkipAdd::ForwardJoin(const LayerContext& ctx, const Tensor& x,
                                            const Tensor& skip, SavedTensors&) const {
  RETURN_IF_ERROR(CheckJoinOperand(*this, "the input", x, input_shape(), -1));
  RETURN_IF_ERROR(CheckJoinOperand(*this, "the skip input", skip, input_shape(), x.shape().dim(0)));
  ASSIGN_OR_RETURN(Tensor y,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(ctx.device.ops().tensor.Add(x, skip, y));
  return y;
}

// dx gets storage of its own: a layer below may keep it until its deferred weight half, and dy
// is the stage's output gradient when this join ends the stage.
absl::StatusOr<SkipJoin::Grads> SkipAdd::BackwardJoin(const LayerContext& ctx, const SavedTensors&,
                                                      const Tensor& dy) const {
  RETURN_IF_ERROR(CheckJoinOperand(*this, "the output gradient", dy, output_shape(), -1));
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(ctx.device, dy.shape(), DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(ctx.device.ops().tensor.Copy(dy, dx));
  return Grads{.dx = std::move(dx), .dskip = dy};
}

}  // namespace gpipe
