#include "layers/causal_self_attention.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "layers/dense.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

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

MatrixView CausalSelfAttention::QkvHeads(const Tensor& qkv, int64_t sample, int part) const {
  return {.tensor = qkv,
          .offset = sample * positions_ * 3 * features_ + part * features_,
          .rows = positions_,
          .cols = head_dim_,
          .ld = 3 * features_,
          .batch_stride = head_dim_};
}

MatrixView CausalSelfAttention::HeadColumns(const Tensor& heads, int64_t sample) const {
  return {.tensor = heads,
          .offset = sample * positions_ * features_,
          .rows = positions_,
          .cols = head_dim_,
          .ld = features_,
          .batch_stride = head_dim_};
}

MatrixView CausalSelfAttention::ScoreBlocks(const Tensor& scores, int64_t sample) const {
  return {.tensor = scores,
          .offset = sample * num_heads_ * positions_ * positions_,
          .rows = positions_,
          .cols = positions_,
          .ld = positions_,
          .batch_stride = positions_ * positions_};
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

  const MatmulOps& matmul = device.ops().matmul;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_)));
  const ProductPrecision precision = ctx.product_precision;
  RETURN_IF_ERROR(DenseForward(device, x, rows, features_, params[qkv_weight()],
                               bias_ ? &params[qkv_bias()] : nullptr, 3 * features_, qkv,
                               precision));
  // S[T, T] = scale * q[T, dh] k[T, dh]^T per head, read in place from the strided qkv rows.
  for (int64_t b = 0; b < batch; ++b) {
    RETURN_IF_ERROR(matmul.Gemm(
        QkvHeads(qkv, b, 0), QkvHeads(qkv, b, 1), ScoreBlocks(probs, b),
        {.transpose_b = true, .alpha = scale, .batch = num_heads_, .precision = precision}));
  }
  // Causal softmax along s; masked entries become exact zeros.
  RETURN_IF_ERROR(
      device.ops().attention.CausalSoftmaxForward(batch * num_heads_, positions_, probs));
  // O_h[T, dh] = P[T, T] v[T, dh], written into the head's columns of O [T, D].
  for (int64_t b = 0; b < batch; ++b) {
    RETURN_IF_ERROR(matmul.Gemm(ScoreBlocks(probs, b), QkvHeads(qkv, b, 2), HeadColumns(heads, b),
                                {.batch = num_heads_, .precision = precision}));
  }
  RETURN_IF_ERROR(DenseForward(device, heads, rows, features_, params[proj_weight()],
                               bias_ ? &params[proj_bias()] : nullptr, features_, y, precision));
  saved.tensors.push_back(x);
  saved.tensors.push_back(std::move(qkv));
  saved.tensors.push_back(std::move(probs));
  saved.tensors.push_back(std::move(heads));
  return y;
}

absl::Status CausalSelfAttention::AttendSampleBackward(Device& device, ProductPrecision precision,
                                                       const Tensor& qkv, const Tensor& probs,
                                                       const Tensor& heads_grad, int64_t sample,
                                                       Tensor& scores_grad,
                                                       Tensor& qkv_grad) const {
  const MatmulOps& matmul = device.ops().matmul;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_)));
  const MatrixView q = QkvHeads(qkv, sample, 0);
  const MatrixView k = QkvHeads(qkv, sample, 1);
  const MatrixView v = QkvHeads(qkv, sample, 2);
  const MatrixView p = ScoreBlocks(probs, sample);
  const MatrixView d_o = HeadColumns(heads_grad, sample);
  const MatrixView ds = ScoreBlocks(scores_grad, 0);
  const GemmOptions per_head{.batch = num_heads_, .precision = precision};
  // dP[T, T] = dO[T, dh] v[T, dh]^T.
  RETURN_IF_ERROR(
      matmul.Gemm(d_o, v, ds, {.transpose_b = true, .batch = num_heads_, .precision = precision}));
  // Softmax backward, in place: dS = P * (dP - rowsum(dP * P)), times the score scale so the
  // products below need none. Masked entries (P = 0) get exact zeros.
  ASSIGN_OR_RETURN(const Tensor sample_probs, probs.SliceRows(sample, sample + 1));
  RETURN_IF_ERROR(device.ops().attention.CausalSoftmaxBackward(num_heads_, positions_, scale,
                                                               sample_probs, scores_grad));
  // dq[T, dh] = dS[T, T] k[T, dh].
  RETURN_IF_ERROR(matmul.Gemm(ds, k, QkvHeads(qkv_grad, sample, 0), per_head));
  // dk[T, dh] = dS[T, T]^T q[T, dh].
  RETURN_IF_ERROR(matmul.Gemm(ds, q, QkvHeads(qkv_grad, sample, 1),
                              {.transpose_a = true, .batch = num_heads_, .precision = precision}));
  // dv[T, dh] = P[T, T]^T dO[T, dh].
  return matmul.Gemm(p, d_o, QkvHeads(qkv_grad, sample, 2),
                     {.transpose_a = true, .batch = num_heads_, .precision = precision});
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
  const ProductPrecision precision = ctx.product_precision;
  const int64_t batch = x.shape().dim(0);
  const int64_t rows = batch * positions_;

  // Output projection.
  RETURN_IF_ERROR(DenseParamGrads(device, heads, dy, rows, features_, features_,
                                  grads[proj_weight()], bias_ ? &grads[proj_bias()] : nullptr,
                                  precision));
  ASSIGN_OR_RETURN(Tensor heads_grad,
                   Tensor::Empty(device, x.shape(), DType::kF32, MemoryKind::kWorkspace));
  RETURN_IF_ERROR(DenseInputGrad(device, dy, rows, features_, params[proj_weight()], features_,
                                 heads_grad, precision));

  // Attention, sample by sample.
  ASSIGN_OR_RETURN(Tensor qkv_grad,
                   Tensor::Empty(device, qkv.shape(), DType::kF32, MemoryKind::kWorkspace));
  ASSIGN_OR_RETURN(Tensor scores_grad,
                   Tensor::Empty(device, Shape{num_heads_, positions_, positions_}, DType::kF32,
                                 MemoryKind::kWorkspace));
  for (int64_t b = 0; b < batch; ++b) {
    RETURN_IF_ERROR(
        AttendSampleBackward(device, precision, qkv, probs, heads_grad, b, scores_grad, qkv_grad));
  }

  // qkv projection.
  RETURN_IF_ERROR(DenseParamGrads(device, x, qkv_grad, rows, features_, 3 * features_,
                                  grads[qkv_weight()], bias_ ? &grads[qkv_bias()] : nullptr,
                                  precision));
  if (!ctx.need_input_grad) return Tensor();
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(device, x.shape(), DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(DenseInputGrad(device, qkv_grad, rows, 3 * features_, params[qkv_weight()],
                                 features_, dx, precision));
  return dx;
}

}  // namespace gpipe
