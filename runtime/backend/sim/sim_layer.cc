#include "runtime/backend/sim/sim_layer.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

absl::Status CheckBatched(const Tensor& t, const char* what) {
  if (!t.defined() || t.shape().rank() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sim: ", what, " must be a defined tensor with a batch dimension, got ", t.DebugString()));
  }
  return absl::OkStatus();
}

}  // namespace

SimLayer::SimLayer(std::unique_ptr<Layer> real, SimDevice& device, SimOpTimes times)
    : LayerDecorator(std::move(real)), device_(device), times_(times) {}

absl::StatusOr<Tensor> SimLayer::Forward(const LayerContext& ctx, std::span<const Tensor>,
                                         const Tensor& x, SavedTensors& saved) const {
  RETURN_IF_ERROR(CheckBatched(x, "the input"));
  // Under mixed precision a layer of f32 inputs also takes the previous layer's bf16 output.
  const bool takes_dtype =
      x.dtype() == input_dtype() || (input_dtype() == DType::kF32 && x.dtype() == output_dtype());
  if (x.shape().WithoutBatch() != input_shape() || !takes_dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("sim: layer '", name(), "' takes ", DTypeName(input_dtype()), "[batch, ",
                     input_shape().ToString(), "], got ", x.DebugString()));
  }
  const int64_t batch = x.shape().dim(0);
  const Shape out_shape = output_shape().WithBatch(batch);
  Tensor y;
  if (OutputAliasesInput()) {
    ASSIGN_OR_RETURN(y, x.Reshaped(out_shape));
  } else {
    ASSIGN_OR_RETURN(y,
                     Tensor::Empty(ctx.device, out_shape, output_dtype(), MemoryKind::kActivation));
  }
  if (ctx.training) {
    saved.clear();
    for (const SavedSpec& spec : SavedPerSample()) {
      switch (spec.ref) {
        case SavedRef::kInput:
          saved.tensors.push_back(x);
          break;
        case SavedRef::kOutput:
          saved.tensors.push_back(y);
          break;
        case SavedRef::kNew: {
          // f32 elements: exact for every declared size that is a multiple of 4 bytes (all
          // built-in layers); others round up to the next 4 bytes. Activation values a
          // composite keeps inside take what this layer's outputs take (bf16 in mixed precision).
          const int64_t elements = (spec.NewBytes(batch, SizeOf(output_dtype())) + 3) / 4;
          ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(ctx.device, Shape({elements}), DType::kF32,
                                                   MemoryKind::kActivation));
          saved.tensors.push_back(std::move(t));
          break;
        }
      }
    }
  }
  RETURN_IF_ERROR(device_.Occupy(times_.forward));
  return y;
}

absl::StatusOr<Tensor> SimLayer::InputGradient(const LayerContext& ctx, const Tensor& dy) const {
  RETURN_IF_ERROR(CheckBatched(dy, "the output gradient"));
  if (!ctx.need_input_grad || input_dtype() != DType::kF32) return Tensor();
  return Tensor::Empty(ctx.device, input_shape().WithBatch(dy.shape().dim(0)), output_dtype(),
                       MemoryKind::kActivation);
}

absl::StatusOr<Tensor> SimLayer::Backward(const LayerContext& ctx, std::span<const Tensor>,
                                          std::span<Tensor>, const SavedTensors&,
                                          const Tensor& dy) const {
  ASSIGN_OR_RETURN(Tensor dx, InputGradient(ctx, dy));
  RETURN_IF_ERROR(device_.Occupy(times_.backward_input + times_.backward_weight));
  return dx;
}

absl::StatusOr<Tensor> SimLayer::BackwardInput(const LayerContext& ctx, std::span<const Tensor>,
                                               const SavedTensors&, const Tensor& dy) const {
  if (!SplitsBackward()) {
    return absl::UnimplementedError(
        absl::StrCat("layer '", name(), "' does not split its backward"));
  }
  ASSIGN_OR_RETURN(Tensor dx, InputGradient(ctx, dy));
  RETURN_IF_ERROR(device_.Occupy(times_.backward_input));
  return dx;
}

absl::Status SimLayer::BackwardWeight(const LayerContext&, std::span<Tensor>, const SavedTensors&,
                                      const Tensor&) const {
  if (!SplitsBackward()) {
    return absl::UnimplementedError(
        absl::StrCat("layer '", name(), "' does not split its backward"));
  }
  return device_.Occupy(times_.backward_weight);
}

// A skip join (skip_add, skip_concat) is timed as any layer: its forward as the layer's forward,
// its backward as the layer's backward; the skip gradient is shape-only, as dx is.
absl::StatusOr<Tensor> SimLayer::ForwardJoin(const LayerContext& ctx, const Tensor& x,
                                             const Tensor& skip, SavedTensors& saved) const {
  RETURN_IF_ERROR(CheckBatched(skip, "the skip input"));
  return Forward(ctx, {}, x, saved);
}

absl::StatusOr<SkipJoin::Grads> SimLayer::BackwardJoin(const LayerContext& ctx, const SavedTensors&,
                                                       const Tensor& dy) const {
  Grads grads;
  ASSIGN_OR_RETURN(grads.dx, InputGradient(ctx, dy));
  ASSIGN_OR_RETURN(grads.dskip, Tensor::Empty(ctx.device, skip_shape().WithBatch(dy.shape().dim(0)),
                                              output_dtype(), MemoryKind::kActivation));
  RETURN_IF_ERROR(device_.Occupy(times_.backward_input + times_.backward_weight));
  return grads;
}

}  // namespace gpipe
