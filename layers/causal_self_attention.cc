#include "layers/causal_self_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "layers/dense.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Layer>> CausalSelfAttention::Create(const pb::Layer& spec,
                                                                   const Shape& input_shape) {
  const pb::CausalSelfAttention& config = spec.causal_self_attention();
  if (!config.has_num_heads() || config.num_heads() < 1) {
    return absl::InvalidArgumentError("causal_self_attention.num_heads must be set and >= 1");
  }
  if (input_shape.rank() != 2 || input_shape.dim(0) < 1 || input_shape.dim(1) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "causal_self_attention needs a per-sample input [T, D], got ", input_shape.ToString()));
  }
  if (input_shape.dim(1) % config.num_heads() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("causal_self_attention.num_heads (", config.num_heads(),
                     ") must divide the input width D = ", input_shape.dim(1)));
  }
  return std::unique_ptr<Layer>(
      new CausalSelfAttention(spec.name(), input_shape, config.num_heads(), config.bias()));
}

CausalSelfAttention::CausalSelfAttention(std::string name, const Shape& input_shape,
                                         int64_t num_heads, bool bias)
    : Layer(std::move(name), input_shape, input_shape),
      positions_(input_shape.dim(0)),
      features_(input_shape.dim(1)),
      num_heads_(num_heads),
      head_dim_(input_shape.dim(1) / num_heads),
      bias_(bias) {}

std::vector<ParamSpec> CausalSelfAttention::parameter_specs() const {
  const double bound = 1.0 / std::sqrt(static_cast<double>(features_));
  std::vector<ParamSpec> specs;
  specs.push_back({"qkv.weight", Shape{3 * features_, features_}, ParamInit::kUniform, bound});
  if (bias_) specs.push_back({"qkv.bias", Shape{3 * features_}, ParamInit::kUniform, bound});
  specs.push_back({"proj.weight", Shape{features_, features_}, ParamInit::kUniform, bound});
  if (bias_) specs.push_back({"proj.bias", Shape{features_}, ParamInit::kUniform, bound});
  return specs;
}

double CausalSelfAttention::ForwardFlopsPerSample() const {
  const double t = static_cast<double>(positions_);
  const double d = static_cast<double>(features_);
  // qkv projection, scores q k^T, P v (both over the full T x T, masked half included, as
  // computed), output projection.
  return 2.0 * t * d * (3.0 * d) + 2.0 * t * t * d + 2.0 * t * t * d + 2.0 * t * d * d;
}

std::vector<SavedSpec> CausalSelfAttention::SavedPerSample() const {
  const int64_t f32 = SizeOf(DType::kF32);
  return {{SavedRef::kInput},
          {SavedRef::kNew, 3 * positions_ * features_ * f32},
          {SavedRef::kNew, num_heads_ * positions_ * positions_ * f32},
          {SavedRef::kNew, positions_ * features_ * f32}};
}

absl::Status CausalSelfAttention::AttendSample(Device& device, const float* qkv, float* probs,
                                               float* heads) const {
  const int64_t t_len = positions_;
  const int64_t qkv_width = 3 * features_;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_)));
  for (int64_t h = 0; h < num_heads_; ++h) {
    const float* q = qkv + h * head_dim_;
    const float* k = q + features_;
    const float* v = q + 2 * features_;
    float* p = probs + h * t_len * t_len;
    // S[T, T] = scale * q[T, dh] k[T, dh]^T, read in place from the strided qkv rows.
    RETURN_IF_ERROR(device.Gemm({.transpose_a = false,
                                 .transpose_b = true,
                                 .m = t_len,
                                 .n = t_len,
                                 .k = head_dim_,
                                 .alpha = scale,
                                 .a = q,
                                 .lda = qkv_width,
                                 .b = k,
                                 .ldb = qkv_width,
                                 .beta = 0.0f,
                                 .c = p,
                                 .ldc = t_len}));
    // Causal softmax along s, shifted by the row maximum; masked entries become exact zeros.
    for (int64_t t = 0; t < t_len; ++t) {
      float* row = p + t * t_len;
      const float max = *std::max_element(row, row + t + 1);
      double sum = 0.0;
      for (int64_t s = 0; s <= t; ++s) {
        row[s] = std::exp(row[s] - max);
        sum += row[s];
      }
      const float inv_sum = static_cast<float>(1.0 / sum);
      for (int64_t s = 0; s <= t; ++s) row[s] *= inv_sum;
      std::fill(row + t + 1, row + t_len, 0.0f);
    }
    // O_h[T, dh] = P[T, T] v[T, dh], written into the head's columns of O [T, D].
    RETURN_IF_ERROR(device.Gemm({.transpose_a = false,
                                 .transpose_b = false,
                                 .m = t_len,
                                 .n = head_dim_,
                                 .k = t_len,
                                 .alpha = 1.0f,
                                 .a = p,
                                 .lda = t_len,
                                 .b = v,
                                 .ldb = qkv_width,
                                 .beta = 0.0f,
                                 .c = heads + h * head_dim_,
                                 .ldc = features_}));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> CausalSelfAttention::Forward(const LayerContext& ctx,
                                                    std::span<const Tensor> params, const Tensor& x,
                                                    SavedTensors& saved) const {
  if (!x.defined() || x.dtype() != DType::kF32 || x.shape().rank() != 3 ||
      x.shape().WithoutBatch() != input_shape()) {
    return absl::InvalidArgumentError(absl::StrCat("causal_self_attention layer '", name(),
                                                   "' expects f32 input [batch, ", positions_, ", ",
                                                   features_, "], got ", x.DebugString()));
  }
  Device& device = ctx.device;
  const int64_t batch = x.shape().dim(0);
  const int64_t rows = batch * positions_;
  ASSIGN_OR_RETURN(Tensor qkv, Tensor::Empty(device, Shape{batch, positions_, 3 * features_},
                                             DType::kF32, MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor probs,
                   Tensor::Empty(device, Shape{batch, num_heads_, positions_, positions_},
                                 DType::kF32, MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor heads,
                   Tensor::Empty(device, x.shape(), DType::kF32, MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor y,
                   Tensor::Empty(device, x.shape(), DType::kF32, MemoryKind::kActivation));

  RETURN_IF_ERROR(DenseForward(device, x.f32(), rows, features_, params[qkv_weight()].f32(),
                                bias_ ? params[qkv_bias()].f32() : nullptr, 3 * features_,
                                qkv.f32()));
  for (int64_t b = 0; b < batch; ++b) {
    RETURN_IF_ERROR(AttendSample(device, qkv.f32() + b * positions_ * 3 * features_,
                                 probs.f32() + b * num_heads_ * positions_ * positions_,
                                 heads.f32() + b * positions_ * features_));
  }
  RETURN_IF_ERROR(DenseForward(device, heads.f32(), rows, features_, params[proj_weight()].f32(),
                                bias_ ? params[proj_bias()].f32() : nullptr, features_, y.f32()));
  saved.tensors.push_back(x);
  saved.tensors.push_back(std::move(qkv));
  saved.tensors.push_back(std::move(probs));
  saved.tensors.push_back(std::move(heads));
  return y;
}

absl::Status CausalSelfAttention::AttendSampleBackward(Device& device, const float* qkv,
                                                       const float* probs, const float* heads_grad,
                                                       float* scores_grad, float* qkv_grad) const {
  const int64_t t_len = positions_;
  const int64_t qkv_width = 3 * features_;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_)));
  for (int64_t h = 0; h < num_heads_; ++h) {
    const float* q = qkv + h * head_dim_;
    const float* k = q + features_;
    const float* v = q + 2 * features_;
    const float* p = probs + h * t_len * t_len;
    const float* d_o = heads_grad + h * head_dim_;
    float* dq = qkv_grad + h * head_dim_;
    float* dk = dq + features_;
    float* dv = dq + 2 * features_;
    // dP[T, T] = dO[T, dh] v[T, dh]^T.
    RETURN_IF_ERROR(device.Gemm({.transpose_a = false,
                                 .transpose_b = true,
                                 .m = t_len,
                                 .n = t_len,
                                 .k = head_dim_,
                                 .alpha = 1.0f,
                                 .a = d_o,
                                 .lda = features_,
                                 .b = v,
                                 .ldb = qkv_width,
                                 .beta = 0.0f,
                                 .c = scores_grad,
                                 .ldc = t_len}));
    // Softmax backward, in place: dS = P * (dP - rowsum(dP * P)), times the score scale so the
    // products below need none. Masked entries (P = 0) get exact zeros.
    for (int64_t t = 0; t < t_len; ++t) {
      const float* p_row = p + t * t_len;
      float* row = scores_grad + t * t_len;
      double dot = 0.0;
      for (int64_t s = 0; s <= t; ++s) dot += static_cast<double>(row[s]) * p_row[s];
      const float dot_f = static_cast<float>(dot);
      for (int64_t s = 0; s <= t; ++s) row[s] = scale * p_row[s] * (row[s] - dot_f);
      std::fill(row + t + 1, row + t_len, 0.0f);
    }
    // dq[T, dh] = dS[T, T] k[T, dh].
    RETURN_IF_ERROR(device.Gemm({.transpose_a = false,
                                 .transpose_b = false,
                                 .m = t_len,
                                 .n = head_dim_,
                                 .k = t_len,
                                 .alpha = 1.0f,
                                 .a = scores_grad,
                                 .lda = t_len,
                                 .b = k,
                                 .ldb = qkv_width,
                                 .beta = 0.0f,
                                 .c = dq,
                                 .ldc = qkv_width}));
    // dk[T, dh] = dS[T, T]^T q[T, dh].
    RETURN_IF_ERROR(device.Gemm({.transpose_a = true,
                                 .transpose_b = false,
                                 .m = t_len,
                                 .n = head_dim_,
                                 .k = t_len,
                                 .alpha = 1.0f,
                                 .a = scores_grad,
                                 .lda = t_len,
                                 .b = q,
                                 .ldb = qkv_width,
                                 .beta = 0.0f,
                                 .c = dk,
                                 .ldc = qkv_width}));
    // dv[T, dh] = P[T, T]^T dO[T, dh].
    RETURN_IF_ERROR(device.Gemm({.transpose_a = true,
                                 .transpose_b = false,
                                 .m = t_len,
                                 .n = head_dim_,
                                 .k = t_len,
                                 .alpha = 1.0f,
                                 .a = p,
                                 .lda = t_len,
                                 .b = d_o,
                                 .ldb = features_,
                                 .beta = 0.0f,
                                 .c = dv,
                                 .ldc = qkv_width}));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> CausalSelfAttention::Backward(const LayerContext& ctx,
                                                     std::span<const Tensor> params,
                                                     std::span<Tensor> grads,
                                                     const SavedTensors& saved,
                                                     const Tensor& dy) const {
  GPIPE_CHECK(saved.tensors.size() == 4) << name() << ": Backward without a matching Forward";
  const Tensor& x = saved.tensors[0];
  const Tensor& qkv = saved.tensors[1];
  const Tensor& probs = saved.tensors[2];
  const Tensor& heads = saved.tensors[3];
  if (!dy.defined() || dy.dtype() != DType::kF32 || dy.shape() != x.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("causal_self_attention layer '", name(),
                                                   "': output gradient ", dy.DebugString(),
                                                   " does not match the input ", x.DebugString()));
  }
  Device& device = ctx.device;
  const int64_t batch = x.shape().dim(0);
  const int64_t rows = batch * positions_;

  // Output projection.
  RETURN_IF_ERROR(DenseParamGrads(device, heads.f32(), dy.f32(), rows, features_, features_,
                                   grads[proj_weight()].f32(),
                                   bias_ ? grads[proj_bias()].f32() : nullptr));
  ASSIGN_OR_RETURN(Tensor heads_grad,
                   Tensor::Empty(device, x.shape(), DType::kF32, MemoryKind::kWorkspace));
  RETURN_IF_ERROR(DenseInputGrad(device, dy.f32(), rows, features_, params[proj_weight()].f32(),
                                  features_, heads_grad.f32()));

  // Attention, sample by sample.
  ASSIGN_OR_RETURN(Tensor qkv_grad,
                   Tensor::Empty(device, qkv.shape(), DType::kF32, MemoryKind::kWorkspace));
  ASSIGN_OR_RETURN(Tensor scores_grad, Tensor::Empty(device, Shape{positions_, positions_},
                                                     DType::kF32, MemoryKind::kWorkspace));
  for (int64_t b = 0; b < batch; ++b) {
    RETURN_IF_ERROR(AttendSampleBackward(device, qkv.f32() + b * positions_ * 3 * features_,
                                         probs.f32() + b * num_heads_ * positions_ * positions_,
                                         heads_grad.f32() + b * positions_ * features_,
                                         scores_grad.f32(),
                                         qkv_grad.f32() + b * positions_ * 3 * features_));
  }

  // qkv projection.
  RETURN_IF_ERROR(DenseParamGrads(device, x.f32(), qkv_grad.f32(), rows, features_, 3 * features_,
                                   grads[qkv_weight()].f32(),
                                   bias_ ? grads[qkv_bias()].f32() : nullptr));
  if (!ctx.need_input_grad) return Tensor();
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(device, x.shape(), DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(DenseInputGrad(device, qkv_grad.f32(), rows, 3 * features_,
                                  params[qkv_weight()].f32(), features_, dx.f32()));
  return dx;
}

}  // namespace gpipe
