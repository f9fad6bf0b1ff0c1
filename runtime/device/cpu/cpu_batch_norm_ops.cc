// CpuNormOps: batch norm. x is [batch, channels, positions]; statistics per channel in double.
#include <cmath>
#include <vector>

#include "runtime/device/cpu/cpu_norm_ops.h"

namespace gpipe {
namespace {

// Per channel in stats [channels, 3]: the mean as a hi + lo pair, and 1/sqrt(var + eps).
constexpr int64_t kMeanHi = 0;
constexpr int64_t kMeanLo = 1;
constexpr int64_t kInvStd = 2;

// y = (x - mean) * inv_std (* weight + bias) over channel c, computed in double.
void Normalize(const BatchNormArgs& args, int64_t c, double mean, double inv_std,
               const float* __restrict in, float* __restrict out) {
  const bool affine = args.weight.defined();
  const double scale = inv_std * (affine ? args.weight.f32()[c] : 1.0);
  const double shift = affine ? args.bias.f32()[c] : 0.0;
  for (int64_t b = 0; b < args.batch; ++b) {
    const int64_t offset = (b * args.channels + c) * args.positions;
    for (int64_t s = 0; s < args.positions; ++s) {
      out[offset + s] = static_cast<float>((in[offset + s] - mean) * scale + shift);
    }
  }
}

}  // namespace

absl::Status CpuNormOps::DoBatchNormTrainForward(const BatchNormArgs& args, const Tensor& x,
                                                 Tensor& running_mean, Tensor& running_var,
                                                 bool update_running, Tensor& y,
                                                 Tensor& stats) const {
  const int64_t n = args.batch * args.positions;
  const float* in = x.f32();
  float* st = stats.f32();
  float* mean_out = running_mean.f32();
  float* var_out = running_var.f32();
  for (int64_t c = 0; c < args.channels; ++c) {
    double sum = 0.0;
    for (int64_t b = 0; b < args.batch; ++b) {
      const float* row = in + (b * args.channels + c) * args.positions;
      for (int64_t s = 0; s < args.positions; ++s) sum += row[s];
    }
    const double mean = sum / static_cast<double>(n);
    double squares = 0.0;
    for (int64_t b = 0; b < args.batch; ++b) {
      const float* row = in + (b * args.channels + c) * args.positions;
      for (int64_t s = 0; s < args.positions; ++s) {
        const double d = row[s] - mean;
        squares += d * d;
      }
    }
    const double variance = squares / static_cast<double>(n);
    const double inv_std = 1.0 / std::sqrt(variance + args.eps);
    const float mean_hi = static_cast<float>(mean);
    st[c * kBatchNormStatsPerChannel + kMeanHi] = mean_hi;
    st[c * kBatchNormStatsPerChannel + kMeanLo] = static_cast<float>(mean - mean_hi);
    st[c * kBatchNormStatsPerChannel + kInvStd] = static_cast<float>(inv_std);
    Normalize(args, c, mean, inv_std, in, y.f32());
    if (update_running) {
      const double unbiased = squares / static_cast<double>(n - 1);
      mean_out[c] = static_cast<float>((1.0 - args.momentum) * mean_out[c] + args.momentum * mean);
      var_out[c] =
          static_cast<float>((1.0 - args.momentum) * var_out[c] + args.momentum * unbiased);
    }
  }
  return absl::OkStatus();
}

absl::Status CpuNormOps::DoBatchNormEvalForward(const BatchNormArgs& args, const Tensor& x,
                                                const Tensor& running_mean,
                                                const Tensor& running_var, Tensor& y) const {
  const float* mean = running_mean.f32();
  const float* var = running_var.f32();
  for (int64_t c = 0; c < args.channels; ++c) {
    Normalize(args, c, mean[c], 1.0 / std::sqrt(static_cast<double>(var[c]) + args.eps), x.f32(),
              y.f32());
  }
  return absl::OkStatus();
}

absl::Status CpuNormOps::DoBatchNormBackward(const BatchNormArgs& args, const Tensor& x,
                                             const Tensor& stats, const Tensor& dy, Tensor& dx,
                                             Tensor& dweight, Tensor& dbias) const {
  const float* in = x.f32();
  const float* g = dy.f32();
  const float* st = stats.f32();
  const double n = static_cast<double>(args.batch * args.positions);
  for (int64_t c = 0; c < args.channels; ++c) {
    const double mean = static_cast<double>(st[c * kBatchNormStatsPerChannel + kMeanHi]) +
                        st[c * kBatchNormStatsPerChannel + kMeanLo];
    const double inv_std = st[c * kBatchNormStatsPerChannel + kInvStd];
    // Per channel: sum of dy and of dy * x_hat, in double.
    double sum_dy = 0.0;
    double sum_dy_xhat = 0.0;
    for (int64_t b = 0; b < args.batch; ++b) {
      const int64_t offset = (b * args.channels + c) * args.positions;
      for (int64_t s = 0; s < args.positions; ++s) {
        sum_dy += g[offset + s];
        sum_dy_xhat += g[offset + s] * ((in[offset + s] - mean) * inv_std);
      }
    }
    if (dweight.defined()) dweight.f32()[c] += static_cast<float>(sum_dy_xhat);
    if (dbias.defined()) dbias.f32()[c] += static_cast<float>(sum_dy);
    if (!dx.defined()) continue;
    const double scale = inv_std * (args.weight.defined() ? args.weight.f32()[c] : 1.0);
    const double mean_dy = sum_dy / n;
    const double mean_dy_xhat = sum_dy_xhat / n;
    float* out = dx.f32();
    for (int64_t b = 0; b < args.batch; ++b) {
      const int64_t offset = (b * args.channels + c) * args.positions;
      for (int64_t s = 0; s < args.positions; ++s) {
        const double x_hat = (in[offset + s] - mean) * inv_std;
        out[offset + s] =
            static_cast<float>(scale * (g[offset + s] - mean_dy - x_hat * mean_dy_xhat));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace gpipe
