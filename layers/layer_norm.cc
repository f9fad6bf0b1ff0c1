#include "layers/layer_norm.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// Per-row statistics kept for Backward: the mean as a float pair (hi + lo carries it to about
// double precision, so inputs with a large common offset still normalize accurately) and
// 1/sqrt(var + eps).
constexpr int64_t kStatsPerRow = 3;

// xhat = (x - mean) * rstd; x - mean_hi is exact when x is close to the mean (Sterbenz).
inline float Normalized(float x, float mean_hi, float mean_lo, float rstd) {
  return ((x - mean_hi) - mean_lo) * rstd;
}

}  // namespace

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
    : Layer(std::move(name), input_shape, input_shape),
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
  ASSIGN_OR_RETURN(Tensor stats, Tensor::Empty(ctx.device, Shape{rows, kStatsPerRow}, DType::kF32,
                                               MemoryKind::kActivation));
  const float* in = x.f32();
  float* out = y.f32();
  float* row_stats = stats.f32();
  const float* weight = affine_ ? params[0].f32() : nullptr;
  const float* bias = affine_ ? params[1].f32() : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * features_;
    float* yr = out + r * features_;
    double sum = 0.0;
    for (int64_t i = 0; i < features_; ++i) sum += xr[i];
    const double mean = sum / static_cast<double>(features_);
    double squares = 0.0;
    for (int64_t i = 0; i < features_; ++i) {
      const double centered = xr[i] - mean;
      squares += centered * centered;
    }
    const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(features_) + eps_);
    const float mean_hi = static_cast<float>(mean);
    const float mean_lo = static_cast<float>(mean - mean_hi);
    const float rstd_f = static_cast<float>(rstd);
    float* stats_r = row_stats + kStatsPerRow * r;
    stats_r[0] = mean_hi;
    stats_r[1] = mean_lo;
    stats_r[2] = rstd_f;
    if (affine_) {
      for (int64_t i = 0; i < features_; ++i) {
        yr[i] = Normalized(xr[i], mean_hi, mean_lo, rstd_f) * weight[i] + bias[i];
      }
    } else {
      for (int64_t i = 0; i < features_; ++i) yr[i] = Normalized(xr[i], mean_hi, mean_lo, rstd_f);
    }
  }
  saved.tensors.push_back(x);
  saved.tensors.push_back(std::move(stats));
  return y;
}

std::vector<SavedSpec> LayerNorm::SavedPerSample() const {
  const int64_t stats_bytes = input_shape().rows() * kStatsPerRow * SizeOf(DType::kF32);
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

absl::StatusOr<Tensor> LayerNorm::Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                           std::span<Tensor> grads, const SavedTensors& saved,
                                           const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  AccumulateParamGrads(grads, saved, dy);
  return InputGrad(ctx, params, saved, dy);
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
  AccumulateParamGrads(grads, saved, dy);
  return absl::OkStatus();
}

void LayerNorm::AccumulateParamGrads(std::span<Tensor> grads, const SavedTensors& saved,
                                     const Tensor& dy) const {
  if (!affine_) return;
  const Tensor& x = saved.tensors[0];
  const float* row_stats = saved.tensors[1].f32();
  const int64_t rows = x.shape().rows();
  const float* in = x.f32();
  const float* g = dy.f32();
  // Summed over rows in double, then added once: the error does not grow with the rows.
  std::vector<double> weight_sum(features_, 0.0), bias_sum(features_, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * features_;
    const float* gr = g + r * features_;
    const float* stats_r = row_stats + kStatsPerRow * r;
    for (int64_t i = 0; i < features_; ++i) {
      weight_sum[i] += gr[i] * Normalized(xr[i], stats_r[0], stats_r[1], stats_r[2]);
      bias_sum[i] += gr[i];
    }
  }
  float* dweight = grads[0].f32();
  float* dbias = grads[1].f32();
  for (int64_t i = 0; i < features_; ++i) {
    dweight[i] += static_cast<float>(weight_sum[i]);
    dbias[i] += static_cast<float>(bias_sum[i]);
  }
}

absl::StatusOr<Tensor> LayerNorm::InputGrad(const LayerContext& ctx, std::span<const Tensor> params,
                                            const SavedTensors& saved, const Tensor& dy) const {
  if (!ctx.need_input_grad) return Tensor();
  const Tensor& x = saved.tensors[0];
  const float* row_stats = saved.tensors[1].f32();
  const int64_t rows = x.shape().rows();
  const float* in = x.f32();
  const float* g = dy.f32();

  // With xhat = (x - mean) * rstd and dxhat = dy * weight:
  //   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  float* out = dx.f32();
  const float* weight = affine_ ? params[0].f32() : nullptr;
  const double inv_features = 1.0 / static_cast<double>(features_);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * features_;
    const float* gr = g + r * features_;
    float* dxr = out + r * features_;
    const float* stats_r = row_stats + kStatsPerRow * r;
    const float rstd = stats_r[2];
    double sum_dxhat = 0.0;
    double sum_dxhat_xhat = 0.0;
    for (int64_t i = 0; i < features_; ++i) {
      const double dxhat = affine_ ? static_cast<double>(gr[i]) * weight[i] : gr[i];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * Normalized(xr[i], stats_r[0], stats_r[1], rstd);
    }
    const float mean_dxhat = static_cast<float>(sum_dxhat * inv_features);
    const float mean_dxhat_xhat = static_cast<float>(sum_dxhat_xhat * inv_features);
    for (int64_t i = 0; i < features_; ++i) {
      const float dxhat = affine_ ? gr[i] * weight[i] : gr[i];
      const float xhat = Normalized(xr[i], stats_r[0], stats_r[1], rstd);
      dxr[i] = rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
  return dx;
}

}  // namespace gpipe
