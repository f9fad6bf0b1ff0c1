#include "layers/batch_norm.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// Rows of the saved statistics tensor [3, C].
constexpr int64_t kMeanHi = 0;
constexpr int64_t kMeanLo = 1;  // mean - mean_hi, so hi + lo carries the double mean
constexpr int64_t kInvStd = 2;

}  // namespace

absl::StatusOr<std::unique_ptr<Layer>> BatchNorm::Create(const pb::Layer& spec,
                                                         const Shape& input_shape) {
  const bool two_d = spec.has_batch_norm2d();
  const pb::BatchNorm& config = two_d ? spec.batch_norm2d() : spec.batch_norm1d();
  const char* type = two_d ? "batch_norm2d" : "batch_norm1d";
  if (two_d ? input_shape.rank() != 3 : (input_shape.rank() < 1 || input_shape.rank() > 2)) {
    return absl::InvalidArgumentError(absl::StrCat(
        type, " needs a per-sample input of shape ",
        two_d ? "[channels, height, width]" : "[channels] or [channels, length]", ", got ",
        input_shape.ToString(),
        two_d ? "; use batch_norm1d for [C] or [C, L]" : "; use batch_norm2d for [C, H, W]"));
  }
  for (int64_t dim : input_shape.dims()) {
    if (dim < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(type, " needs every input dimension >= 1, got ", input_shape.ToString()));
    }
  }
  if (!(config.eps() > 0.0) || !std::isfinite(config.eps())) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, ".eps must be a finite number > 0, got ", config.eps()));
  }
  if (!(config.momentum() > 0.0 && config.momentum() <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, ".momentum must be in (0, 1], got ", config.momentum()));
  }
  return std::unique_ptr<Layer>(new BatchNorm(spec.name(), type, input_shape, config.eps(),
                                              config.momentum(), config.affine()));
}

BatchNorm::BatchNorm(std::string name, const char* type, Shape input_shape, double eps,
                     double momentum, bool affine)
    : Layer(std::move(name), input_shape, input_shape),
      type_(type),
      channels_(input_shape.dim(0)),
      positions_(input_shape.num_elements() / input_shape.dim(0)),
      eps_(eps),
      momentum_(momentum),
      affine_(affine) {}

std::vector<ParamSpec> BatchNorm::parameter_specs() const {
  if (!affine_) return {};
  return {{"weight", Shape{channels_}, ParamInit::kOnes},
          {"bias", Shape{channels_}, ParamInit::kZeros}};
}

std::vector<ParamSpec> BatchNorm::buffer_specs() const {
  return {{"running_mean", Shape{channels_}, ParamInit::kZeros},
          {"running_var", Shape{channels_}, ParamInit::kOnes}};
}

double BatchNorm::ForwardFlopsPerSample() const {
  // Statistics (sum, squared deviations) and the normalization, a few operations per element.
  return 6.0 * static_cast<double>(input_shape().num_elements());
}

std::vector<SavedSpec> BatchNorm::SavedPerSample() const {
  return {{SavedRef::kInput}, {SavedRef::kNew, 0, 3 * channels_ * 4}};
}

absl::StatusOr<Tensor> BatchNorm::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                          const Tensor& x, SavedTensors& saved) const {
  if (!x.defined() || x.dtype() != DType::kF32 || x.shape().rank() < 1 ||
      x.shape().WithoutBatch() != input_shape()) {
    return absl::InvalidArgumentError(absl::StrCat(type_, " layer '", name(),
                                                   "' expects f32 samples of shape ",
                                                   input_shape().ToString(), ", got ",
                                                   x.DebugString()));
  }
  if (ctx.buffers.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        type_, " layer '", name(), "' needs its running_mean and running_var buffers, got ",
        ctx.buffers.size(), " buffers"));
  }
  for (const Tensor& buffer : ctx.buffers) {
    // Written in place below: a buffer of the wrong size would be written out of bounds.
    if (!buffer.defined() || buffer.dtype() != DType::kF32 || buffer.num_elements() != channels_) {
      return absl::InvalidArgumentError(absl::StrCat(
          type_, " layer '", name(), "' needs running_mean and running_var buffers of f32[",
          channels_, "], got ", buffer.DebugString()));
    }
  }
  const int64_t batch = x.shape().dim(0);
  const int64_t n = batch * positions_;
  const float* in = x.f32();
  const float* weight = affine_ ? params[0].f32() : nullptr;
  const float* bias = affine_ ? params[1].f32() : nullptr;
  ASSIGN_OR_RETURN(Tensor y,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  float* out = y.f32();
  const auto normalize = [&](int64_t c, double mean, double inv_std) {
    const double scale = inv_std * (affine_ ? weight[c] : 1.0);
    const double shift = affine_ ? bias[c] : 0.0;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t offset = (b * channels_ + c) * positions_;
      for (int64_t s = 0; s < positions_; ++s) {
        out[offset + s] = static_cast<float>((in[offset + s] - mean) * scale + shift);
      }
    }
  };

  if (!ctx.training) {
    const float* running_mean = ctx.buffers[0].f32();
    const float* running_var = ctx.buffers[1].f32();
    for (int64_t c = 0; c < channels_; ++c) {
      normalize(c, running_mean[c], 1.0 / std::sqrt(static_cast<double>(running_var[c]) + eps_));
    }
    return y;
  }
  if (n < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        type_, " layer '", name(), "' got one value per channel (batch ", batch,
        "); training batch statistics need at least two: use micro-batches of 2 or more samples"));
  }
  ASSIGN_OR_RETURN(Tensor stats, Tensor::Empty(ctx.device, Shape{3, channels_}, DType::kF32,
                                               MemoryKind::kActivation));
  float* st = stats.f32();
  float* running_mean = ctx.buffers[0].f32();
  float* running_var = ctx.buffers[1].f32();
  for (int64_t c = 0; c < channels_; ++c) {
    double sum = 0.0;
    for (int64_t b = 0; b < batch; ++b) {
      const float* row = in + (b * channels_ + c) * positions_;
      for (int64_t s = 0; s < positions_; ++s) sum += row[s];
    }
    const double mean = sum / static_cast<double>(n);
    double squares = 0.0;
    for (int64_t b = 0; b < batch; ++b) {
      const float* row = in + (b * channels_ + c) * positions_;
      for (int64_t s = 0; s < positions_; ++s) {
        const double d = row[s] - mean;
        squares += d * d;
      }
    }
    const double variance = squares / static_cast<double>(n);
    const double inv_std = 1.0 / std::sqrt(variance + eps_);
    const float mean_hi = static_cast<float>(mean);
    st[kMeanHi * channels_ + c] = mean_hi;
    st[kMeanLo * channels_ + c] = static_cast<float>(mean - mean_hi);
    st[kInvStd * channels_ + c] = static_cast<float>(inv_std);
    normalize(c, mean, inv_std);
    if (ctx.update_buffers) {
      const double unbiased = squares / static_cast<double>(n - 1);
      running_mean[c] =
          static_cast<float>((1.0 - momentum_) * running_mean[c] + momentum_ * mean);
      running_var[c] =
          static_cast<float>((1.0 - momentum_) * running_var[c] + momentum_ * unbiased);
    }
  }
  saved.tensors.push_back(x);
  saved.tensors.push_back(std::move(stats));
  return y;
}

absl::Status BatchNorm::CheckOutputGrad(const SavedTensors& saved, const Tensor& dy) const {
  GPIPE_CHECK(saved.tensors.size() == 2) << name() << ": Backward without a training Forward";
  const Tensor& x = saved.tensors[0];
  if (!dy.defined() || dy.dtype() != DType::kF32 || dy.shape() != x.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat(type_, " layer '", name(), "': output gradient ", dy.DebugString(),
                     " does not match the forward's output f32", x.shape().ToString()));
  }
  return absl::OkStatus();
}

void BatchNorm::ChannelSums(const Tensor& x, const Tensor& stats, const Tensor& dy,
                            std::vector<double>& sum_dy, std::vector<double>& sum_dy_xhat) const {
  const int64_t batch = x.shape().dim(0);
  const float* in = x.f32();
  const float* g = dy.f32();
  const float* st = stats.f32();
  sum_dy.assign(channels_, 0.0);
  sum_dy_xhat.assign(channels_, 0.0);
  for (int64_t c = 0; c < channels_; ++c) {
    const double mean =
        static_cast<double>(st[kMeanHi * channels_ + c]) + st[kMeanLo * channels_ + c];
    const double inv_std = st[kInvStd * channels_ + c];
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t offset = (b * channels_ + c) * positions_;
      for (int64_t s = 0; s < positions_; ++s) {
        sum_dy[c] += g[offset + s];
        sum_dy_xhat[c] += g[offset + s] * ((in[offset + s] - mean) * inv_std);
      }
    }
  }
}

absl::StatusOr<Tensor> BatchNorm::InputGrad(const LayerContext& ctx,
                                            std::span<const Tensor> params,
                                            const SavedTensors& saved, const Tensor& dy) const {
  if (!ctx.need_input_grad) return Tensor();
  const Tensor& x = saved.tensors[0];
  const Tensor& stats = saved.tensors[1];
  std::vector<double> sum_dy, sum_dy_xhat;
  ChannelSums(x, stats, dy, sum_dy, sum_dy_xhat);
  const int64_t batch = x.shape().dim(0);
  const double n = static_cast<double>(batch * positions_);
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  const float* in = x.f32();
  const float* g = dy.f32();
  const float* st = stats.f32();
  float* out = dx.f32();
  for (int64_t c = 0; c < channels_; ++c) {
    const double mean =
        static_cast<double>(st[kMeanHi * channels_ + c]) + st[kMeanLo * channels_ + c];
    const double inv_std = st[kInvStd * channels_ + c];
    const double scale = inv_std * (affine_ ? params[0].f32()[c] : 1.0);
    const double mean_dy = sum_dy[c] / n;
    const double mean_dy_xhat = sum_dy_xhat[c] / n;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t offset = (b * channels_ + c) * positions_;
      for (int64_t s = 0; s < positions_; ++s) {
        const double x_hat = (in[offset + s] - mean) * inv_std;
        out[offset + s] =
            static_cast<float>(scale * (g[offset + s] - mean_dy - x_hat * mean_dy_xhat));
      }
    }
  }
  return dx;
}

absl::Status BatchNorm::WeightGrad(std::span<Tensor> grads, const SavedTensors& saved,
                                   const Tensor& dy) const {
  if (!affine_) return absl::OkStatus();
  std::vector<double> sum_dy, sum_dy_xhat;
  ChannelSums(saved.tensors[0], saved.tensors[1], dy, sum_dy, sum_dy_xhat);
  float* dweight = grads[0].f32();
  float* dbias = grads[1].f32();
  for (int64_t c = 0; c < channels_; ++c) {
    dweight[c] += static_cast<float>(sum_dy_xhat[c]);
    dbias[c] += static_cast<float>(sum_dy[c]);
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> BatchNorm::Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                           std::span<Tensor> grads, const SavedTensors& saved,
                                           const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  RETURN_IF_ERROR(WeightGrad(grads, saved, dy));
  return InputGrad(ctx, params, saved, dy);
}

absl::StatusOr<Tensor> BatchNorm::BackwardInput(const LayerContext& ctx,
                                                std::span<const Tensor> params,
                                                const SavedTensors& saved,
                                                const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  return InputGrad(ctx, params, saved, dy);
}

absl::Status BatchNorm::BackwardWeight(const LayerContext&, std::span<Tensor> grads,
                                       const SavedTensors& saved, const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  return WeightGrad(grads, saved, dy);
}

}  // namespace gpipe
