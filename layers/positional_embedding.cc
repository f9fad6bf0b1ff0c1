#include "layers/positional_embedding.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Layer>> PositionalEmbedding::Create(const pb::Layer& spec,
                                                                   const Shape& input_shape) {
  const pb::PositionalEmbedding& config = spec.positional_embedding();
  if (!config.has_max_positions() || config.max_positions() < 1) {
    return absl::InvalidArgumentError(
        "positional_embedding.max_positions must be set and >= 1 (at least the sequence length)");
  }
  if (!(config.init_std() >= 0.0) || !std::isfinite(config.init_std())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "positional_embedding.init_std must be >= 0 and finite, got ", config.init_std()));
  }
  if (input_shape.rank() != 2 || input_shape.dim(0) < 1 || input_shape.dim(1) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "positional_embedding needs a per-sample input [T, D], got ", input_shape.ToString()));
  }
  if (input_shape.dim(0) > config.max_positions()) {
    return absl::InvalidArgumentError(
        absl::StrCat("positional_embedding.max_positions is ", config.max_positions(),
                     " but the sequence length T is ", input_shape.dim(0),
                     "; set max_positions >= ", input_shape.dim(0)));
  }
  return std::unique_ptr<Layer>(
      new PositionalEmbedding(spec.name(), input_shape, config.max_positions(), config.init_std()));
}

PositionalEmbedding::PositionalEmbedding(std::string name, const Shape& input_shape,
                                         int64_t max_positions, double init_std)
    : Layer(std::move(name), input_shape, input_shape),
      max_positions_(max_positions),
      positions_(input_shape.dim(0)),
      features_(input_shape.dim(1)),
      init_std_(init_std) {}

std::vector<ParamSpec> PositionalEmbedding::parameter_specs() const {
  return {{"weight", Shape{max_positions_, features_}, ParamInit::kNormal, init_std_}};
}

double PositionalEmbedding::ForwardFlopsPerSample() const {
  return static_cast<double>(positions_ * features_);
}

absl::StatusOr<Tensor> PositionalEmbedding::Forward(const LayerContext& ctx,
                                                    std::span<const Tensor> params, const Tensor& x,
                                                    SavedTensors& saved) const {
  if (!x.defined() || x.dtype() != DType::kF32 || x.shape().rank() != 3 ||
      x.shape().WithoutBatch() != input_shape()) {
    return absl::InvalidArgumentError(absl::StrCat("positional_embedding layer '", name(),
                                                   "' expects f32 input [batch, ", positions_, ", ",
                                                   features_, "], got ", x.DebugString()));
  }
  const int64_t per_sample = positions_ * features_;
  ASSIGN_OR_RETURN(Tensor y,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(
      WithContext(ctx.device.ops().embedding.AddRowBroadcast(x, params[0], per_sample, y),
                  absl::StrCat("positional_embedding layer '", name(), "'")));
  return y;
}

absl::StatusOr<Tensor> PositionalEmbedding::Backward(const LayerContext& ctx,
                                                     std::span<const Tensor> params,
                                                     std::span<Tensor> grads,
                                                     const SavedTensors& saved,
                                                     const Tensor& dy) const {
  if (!dy.defined() || dy.dtype() != DType::kF32 || dy.shape().rank() != 3 ||
      dy.shape().WithoutBatch() != input_shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("positional_embedding layer '", name(), "': output gradient ",
                     dy.DebugString(), " is not f32 [batch, ", positions_, ", ", features_, "]"));
  }
  const int64_t batch = dy.shape().dim(0);
  const int64_t per_sample = positions_ * features_;
  // Summed over the batch in double, then added once; rows T.. of the table get no gradient.
  RETURN_IF_ERROR(WithContext(
      ctx.device.ops().tensor.SumAccumulate(dy, batch, per_sample, /*inner=*/1, grads[0]),
      absl::StrCat("positional_embedding layer '", name(), "'")));

  if (!ctx.need_input_grad) return Tensor();
  // A copy, so dx never aliases dy: the runtime may retag dx as a boundary gradient while a
  // split layer after this one still holds dy.
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(ctx.device, dy.shape(), DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(ctx.device.ops().tensor.Copy(dy, dx));
  return dx;
}

}  // namespace gpipe
