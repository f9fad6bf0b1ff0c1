#include "layers/rms_norm.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Layer>> RmsNorm::Create(const pb::Layer& spec,
                                                       const Shape& input_shape) {
  const double eps = spec.rms_norm().eps();
  if (!(eps > 0.0) || !std::isfinite(eps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rms_norm.eps must be > 0 and finite, got ", eps));
  }
  if (input_shape.rank() < 1 || input_shape.last() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rms_norm needs an input with a last dimension >= 1, got ", input_shape.ToString()));
  }
  return std::unique_ptr<Layer>(new RmsNorm(spec.name(), input_shape, eps));
}

RmsNorm::RmsNorm(std::string name, const Shape& input_shape, double eps)
    : SplitBackwardLayer(std::move(name), input_shape, input_shape),
      features_(input_shape.last()),
      eps_(eps) {}

std::vector<ParamSpec> RmsNorm::parameter_specs() const {
  return {{"weight", Shape{features_}, ParamInit::kOnes, 0.0}};
}

double RmsNorm::ForwardFlopsPerSample() const {
  // Square-and-add, normalize, and the weight: about 4 operations per element.
  return 4.0 * static_cast<double>(input_shape().num_elements());
}

RmsNormArgs RmsNorm::Args(const Tensor& weight, int64_t rows) const {
  return RmsNormArgs{.rows = rows, .features = features_, .eps = eps_, .weight = weight};
}

absl::StatusOr<Tensor> RmsNorm::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                        const Tensor& x, SavedTensors& saved) const {
  if (x.dtype() != DType::kF32 || x.shape().rank() < 1 || x.shape().last() != features_) {
    return absl::InvalidArgumentError(absl::StrCat("rms_norm layer '", name(),
                                                   "' expects f32 input [..., ", features_,
                                                   "], got ", x.DebugString()));
  }
  const int64_t rows = x.shape().rows();
  ASSIGN_OR_RETURN(Tensor y,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor stats, Tensor::Empty(ctx.device, Shape{rows, kRmsNormStatsPerRow},
                                               DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(ctx.device.ops().norm.RmsNormForward(Args(params[0], rows), x, y, stats));
  saved.tensors.push_back(x);
  saved.tensors.push_back(std::move(stats));
  return y;
}

std::vector<SavedSpec> RmsNorm::SavedPerSample() const {
  const int64_t stats_bytes = input_shape().rows() * kRmsNormStatsPerRow * SizeOf(DType::kF32);
  return {{SavedRef::kInput}, {SavedRef::kNew, stats_bytes}};
}

absl::Status RmsNorm::CheckOutputGrad(const SavedTensors& saved, const Tensor& dy) const {
  GPIPE_CHECK(saved.tensors.size() == 2) << name() << ": Backward without a matching Forward";
  const Tensor& x = saved.tensors[0];
  if (dy.dtype() != DType::kF32 || dy.shape() != x.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("rms_norm layer '", name(),
                                                   "': output gradient ", dy.DebugString(),
                                                   " does not match the input ", x.DebugString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> RmsNorm::BackwardInput(const LayerContext& ctx,
                                              std::span<const Tensor> params,
                                              const SavedTensors& saved, const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  if (!ctx.need_input_grad) return Tensor();
  const Tensor& x = saved.tensors[0];
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(ctx.device.ops().norm.RmsNormBackwardInput(Args(params[0], x.shape().rows()), x,
                                                             saved.tensors[1], dy, dx));
  return dx;
}

absl::Status RmsNorm::BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                                     const SavedTensors& saved, const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  const Tensor& x = saved.tensors[0];
  return ctx.device.ops().norm.RmsNormBackwardParams(Args(Tensor(), x.shape().rows()), x,
                                                     saved.tensors[1], dy, grads[0]);
}

}  // namespace gpipe
