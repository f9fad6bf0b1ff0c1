// CpuNormOps: layer norm (batch norm is in cpu_batch_norm_ops.cc).
#include "runtime/device/cpu/cpu_norm_ops.h"

#include <cmath>
#include <vector>

namespace gpipe {
namespace {

// xhat = (x - mean) * rstd; x - mean_hi is exact when x is close to the mean (Sterbenz).
inline float Normalized(float x, float mean_hi, float mean_lo, float rstd) {
  return ((x - mean_hi) - mean_lo) * rstd;
}

}  // namespace

absl::Status CpuNormOps::DoLayerNormForward(const LayerNormArgs& args, const Tensor& x, Tensor& y,
                                            Tensor& stats) const {
  const int64_t features = args.features;
  const bool affine = args.weight.defined();
  const float* in = x.f32();
  float* out = y.f32();
  float* row_stats = stats.f32();
  const float* __restrict weight = affine ? args.weight.f32() : nullptr;
  const float* __restrict bias = affine ? args.bias.f32() : nullptr;
  for (int64_t r = 0; r < args.rows; ++r) {
    const float* __restrict xr = in + r * features;
    float* __restrict yr = out + r * features;
    double sum = 0.0;
    for (int64_t i = 0; i < features; ++i) sum += xr[i];
    const double mean = sum / static_cast<double>(features);
    double squares = 0.0;
    for (int64_t i = 0; i < features; ++i) {
      const double centered = xr[i] - mean;
      squares += centered * centered;
    }
    const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(features) + args.eps);
    const float mean_hi = static_cast<float>(mean);
    const float mean_lo = static_cast<float>(mean - mean_hi);
    const float rstd_f = static_cast<float>(rstd);
    float* stats_r = row_stats + kLayerNormStatsPerRow * r;
    stats_r[0] = mean_hi;
    stats_r[1] = mean_lo;
    stats_r[2] = rstd_f;
    if (affine) {
      for (int64_t i = 0; i < features; ++i) {
        yr[i] = Normalized(xr[i], mean_hi, mean_lo, rstd_f) * weight[i] + bias[i];
      }
    } else {
      for (int64_t i = 0; i < features; ++i) yr[i] = Normalized(xr[i], mean_hi, mean_lo, rstd_f);
    }
  }
  return absl::OkStatus();
}

absl::Status CpuNormOps::DoLayerNormBackwardInput(const LayerNormArgs& args, const Tensor& x,
                                                  const Tensor& stats, const Tensor& dy,
                                                  Tensor& dx) const {
  if (!dx.defined()) return absl::OkStatus();
  const int64_t features = args.features;
  const bool affine = args.weight.defined();
  const float* __restrict weight = affine ? args.weight.f32() : nullptr;
  const double inv_features = 1.0 / static_cast<double>(features);
  // With xhat = (x - mean) * rstd and dxhat = dy * weight:
  //   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
  for (int64_t r = 0; r < args.rows; ++r) {
    const float* __restrict xr = x.f32() + r * features;
    const float* __restrict gr = dy.f32() + r * features;
    float* __restrict dxr = dx.f32() + r * features;
    const float* stats_r = stats.f32() + kLayerNormStatsPerRow * r;
    const float mean_hi = stats_r[0];
    const float mean_lo = stats_r[1];
    const float rstd = stats_r[2];
    double sum_dxhat = 0.0;
    double sum_dxhat_xhat = 0.0;
    for (int64_t i = 0; i < features; ++i) {
      const double dxhat = affine ? static_cast<double>(gr[i]) * weight[i] : gr[i];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * Normalized(xr[i], mean_hi, mean_lo, rstd);
    }
    const float mean_dxhat = static_cast<float>(sum_dxhat * inv_features);
    const float mean_dxhat_xhat = static_cast<float>(sum_dxhat_xhat * inv_features);
    for (int64_t i = 0; i < features; ++i) {
      const float dxhat = affine ? gr[i] * weight[i] : gr[i];
      const float xhat = Normalized(xr[i], mean_hi, mean_lo, rstd);
      dxr[i] = rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
  return absl::OkStatus();
}

absl::Status CpuNormOps::DoLayerNormBackwardParams(const LayerNormArgs& args, const Tensor& x,
                                                   const Tensor& stats, const Tensor& dy,
                                                   Tensor& dweight, Tensor& dbias) const {
  if (!dweight.defined() && !dbias.defined()) return absl::OkStatus();
  const int64_t features = args.features;
  // Summed over rows in double, then added once: the error does not grow with the rows.
  std::vector<double> weight_sum(features, 0.0), bias_sum(features, 0.0);
  for (int64_t r = 0; r < args.rows; ++r) {
    const float* __restrict xr = x.f32() + r * features;
    const float* __restrict gr = dy.f32() + r * features;
    const float* stats_r = stats.f32() + kLayerNormStatsPerRow * r;
    for (int64_t i = 0; i < features; ++i) {
      weight_sum[i] += gr[i] * Normalized(xr[i], stats_r[0], stats_r[1], stats_r[2]);
      bias_sum[i] += gr[i];
    }
  }
  if (dweight.defined()) {
    float* out = dweight.f32();
    for (int64_t i = 0; i < features; ++i) out[i] += static_cast<float>(weight_sum[i]);
  }
  if (dbias.defined()) {
    float* out = dbias.f32();
    for (int64_t i = 0; i < features; ++i) out[i] += static_cast<float>(bias_sum[i]);
  }
  return absl::OkStatus();
}

}  // namespace gpipe
