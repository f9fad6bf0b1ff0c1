// CpuNormOps: RMS norm (Llama's LlamaRMSNorm), row by row with double sums.
#include <cmath>
#include <vector>

#include "runtime/device/cpu/cpu_norm_ops.h"

namespace gpipe {

absl::Status CpuNormOps::DoRmsNormForward(const RmsNormArgs& args, const Tensor& x, Tensor& y,
                                          Tensor& stats) const {
  const int64_t features = args.features;
  const float* __restrict weight = args.weight.f32();
  for (int64_t r = 0; r < args.rows; ++r) {
    const float* __restrict xr = x.f32() + r * features;
    float* __restrict yr = y.f32() + r * features;
    double squares = 0.0;
    for (int64_t i = 0; i < features; ++i) squares += static_cast<double>(xr[i]) * xr[i];
    const float rstd =
        static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(features) + args.eps));
    stats.f32()[r] = rstd;
    // (x * rstd) * weight, in that order: transformers rounds the normalized row before the
    // weight multiplies it.
    for (int64_t i = 0; i < features; ++i) yr[i] = (xr[i] * rstd) * weight[i];
  }
  return absl::OkStatus();
}

absl::Status CpuNormOps::DoRmsNormBackwardInput(const RmsNormArgs& args, const Tensor& x,
                                                const Tensor& stats, const Tensor& dy,
                                                Tensor& dx) const {
  const int64_t features = args.features;
  const float* __restrict weight = args.weight.f32();
  const double inv_features = 1.0 / static_cast<double>(features);
  for (int64_t r = 0; r < args.rows; ++r) {
    const float* __restrict xr = x.f32() + r * features;
    const float* __restrict gr = dy.f32() + r * features;
    float* __restrict dxr = dx.f32() + r * features;
    const float rstd = stats.f32()[r];
    double sum_g_xhat = 0.0;
    for (int64_t i = 0; i < features; ++i) {
      sum_g_xhat += static_cast<double>(gr[i]) * weight[i] * (xr[i] * rstd);
    }
    const float mean_g_xhat = static_cast<float>(sum_g_xhat * inv_features);
    for (int64_t i = 0; i < features; ++i) {
      dxr[i] = rstd * (gr[i] * weight[i] - (xr[i] * rstd) * mean_g_xhat);
    }
  }
  return absl::OkStatus();
}

absl::Status CpuNormOps::DoRmsNormBackwardParams(const RmsNormArgs& args, const Tensor& x,
                                                 const Tensor& stats, const Tensor& dy,
                                                 Tensor& dweight) const {
  const int64_t features = args.features;
  // Summed over rows in double, then added once: the error does not grow with the rows.
  std::vector<double> sums(features, 0.0);
  for (int64_t r = 0; r < args.rows; ++r) {
    const float* __restrict xr = x.f32() + r * features;
    const float* __restrict gr = dy.f32() + r * features;
    const float rstd = stats.f32()[r];
    for (int64_t i = 0; i < features; ++i) sums[i] += static_cast<double>(gr[i]) * (xr[i] * rstd);
  }
  float* out = dweight.f32();
  for (int64_t i = 0; i < features; ++i) out[i] += static_cast<float>(sums[i]);
  return absl::OkStatus();
}

}  // namespace gpipe
