#include "layers/layer_norm.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {
absl::StatusOr<std::unique_ptr<Layer>> LayerNorm::Create(const pb::Layer& spec,
                                                         const Shape& input_shape) {
  const pb::LayerNorm& config = spec.layer_norm();
  if (!(config.eps() > 0.0) || !std::isfinite(config.eps())) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer_norm.eps must be > 0 and finite, got ", config.eps()));
  }
  if (input_shape.rank() < 1 || input_shape.last() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer_norm needs an input with a last dimension >= 1, got ", input_shape.ToString()));
  }
  return std::unique_ptr<Layer>(
      new LayerNorm(spec.name(), input_shape, config.eps(), config.elementwise_affine()));
}

LayerNorm::LayerNorm(std::string name, const Shape& input_shape, double eps, bool affine)
    : SplitBackwardLayer(std::move(name), input_shape, input_shape),
      features_(input_shape.last()),
      eps_(eps),
      affine_(affine) {}

std::vector<ParamSpec> LayerNorm::parameter_specs() const {
  if (!affine_) return {};
  return {{"weight", Shape{features_}, ParamInit::kOnes, 0.0},
          {"bias", Shape{features_}, ParamInit::kZeros, 0.0}};
}

double LayerNorm::ForwardFlopsPerSample() const {
  // Mean, variance, normalize, and the affine multiply-add: about 8 operations per element.
  return 8.0 * static_cast<double>(input_shape().num_elements());
}

absl::StatusOr<Tensor> LayerNorm::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                          const Tensor& x, SavedTensors& saved) const {
  if (x.dtype() != DType::kF32 || x.shape().rank() < 1 || x.shape().last() != features_) {
    return absl::InvalidArgumentError(absl::StrCat("layer_norm layer '", name(),
                                                   "' expects f32 input [..., ", features_,
                                                   "], got ", x.DebugString()));
  }
  const int64_t rows = x.shape().rows();
  ASSIGN_OR_RETURN(Tensor y,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor stats, Tensor::Empty(ctx.device, Shape{rows, kLayerNormStatsPerRow},
                                               DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(ctx.device.ops().norm.LayerNormForward(Args(params, rows), x, y, stats));
  saved.tensors.push_back(x);
  saved.tensors.push_back(std::move(stats));
  return y;
}

LayerNormArgs LayerNorm::Args(std::span<const Tensor> params, int64_t rows) const {
  return LayerNormArgs{.rows = rows,
                       .features = features_,
                       .eps = eps_,
                       .weight = affine_ && !params.empty() ? params[0] : Tensor(),
                       .bias = affine_ && !params.empty() ? params[1] : Tensor()};
}

std::vector<SavedSpec> LayerNorm::SavedPerSample() const {
  const int64_t stats_bytes = input_shape().rows() * kLayerNormStatsPerRow * SizeOf(DType::kF32);
  return {{SavedRef::kInput}, {SavedRef::kNew, stats_bytes}};
}

absl::Status LayerNorm::CheckOutputGrad(const SavedTensors& saved, const Tensor& dy) const {
  GPIPE_CHECK(saved.tensors.size() == 2) << name() << ": Backward without a matching Forward";
  const Tensor& x = saved.tensors[0];
  if (dy.dtype() != DType::kF32 || dy.shape() != x.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("layer_norm layer '", name(),
                                                   "': output gradient ", dy.DebugString(),
                                                   " does not match the input ", x.DebugString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> LayerNorm::BackwardInput(const LayerContext& ctx,
                                                std::span<const Tensor> params,
                                                const SavedTensors& saved, const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  return InputGrad(ctx, params, saved, dy);
}

absl::Status LayerNorm::BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                                       const SavedTensors& saved, const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  return AccumulateParamGrads(ctx, grads, saved, dy);
}

absl::Status LayerNorm::AccumulateParamGrads(const LayerContext& ctx, std::span<Tensor> grads,
                                             const SavedTensors& saved, const Tensor& dy) const {
  if (!affine_) return absl::OkStatus();
  const Tensor& x = saved.tensors[0];
  return ctx.device.ops().norm.LayerNormBackwardParams(Args({}, x.shape().rows()), x,
                                                       saved.tensors[1], dy, grads[0], grads[1]);
}

absl::StatusOr<Tensor> LayerNorm::InputGrad(const LayerContext& ctx, std::span<const Tensor> params,
                                            const SavedTensors& saved, const Tensor& dy) const {
  if (!ctx.need_input_grad) return Tensor();
  const Tensor& x = saved.tensors[0];
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(ctx.device.ops().norm.LayerNormBackwardInput(Args(params, x.shape().rows()), x,
                                                               saved.tensors[1], dy, dx));
  return dx;
}

}  // namespace gpipe
