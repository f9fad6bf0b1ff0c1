#include "layers/causal_self_attention.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "layers/bf16_tensors.h"
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
  specs.push_back({"qkv.weight", Shape{3 * features_, features_}, ParamInit::kUniform, bound,
                   /*product_operand=*/true});
  if (bias_) specs.push_back({"qkv.bias", Shape{3 * features_}, ParamInit::kUniform, bound});
  specs.push_back({"proj.weight", Shape{features_, features_}, ParamInit::kUniform, bound,
                   /*product_operand=*/true});
  if (bias_) specs.push_back({"proj.bias", Shape{features_}, ParamInit::kUniform, bound});
  return specs;
}

double CausalSelfAttention::ForwardFlopsPerSample() const {
  const double t = static_cast<double>(positions_);
  const double d = static_cast<double>(features_);
  // qkv projection, scores q k^T, P v, output projection. The two attention products count the
  // full T x T (model FLOPs, as MFU counts them); the fused kernels skip the tiles (CPU) or
  // row blocks (CUDA) above the diagonal, so they compute little more than half of that.
  return 2.0 * t * d * (3.0 * d) + 2.0 * t * t * d + 2.0 * t * t * d + 2.0 * t * d * d;
}

std::vector<SavedSpec> CausalSelfAttention::SavedPerSample() const {
  const int64_t f32 = SizeOf(DType::kF32);
  return {{SavedRef::kInput},
          {.ref = SavedRef::kNew, .activation_elements_per_sample = 3 * positions_ * features_},
          {.ref = SavedRef::kNew, .bytes_per_sample = num_heads_ * positions_ * f32},
          {.ref = SavedRef::kNew, .activation_elements_per_sample = positions_ * features_}};
}

FusedAttentionArgs CausalSelfAttention::AttentionArgs(int64_t batch,
                                                      ProductPrecision precision) const {
  return {.batch = batch,
          .t = positions_,
          .heads = num_heads_,
          .head_dim = head_dim_,
          .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_))),
          .precision = precision};
}

absl::StatusOr<Tensor> CausalSelfAttention::Forward(const LayerContext& ctx,
                                                    std::span<const Tensor> params, const Tensor& x,
                                                    SavedTensors& saved) const {
  // bf16 only where the products take it as it is (TakesBf16Inputs).
  const bool bf16_ok = ctx.product_precision == ProductPrecision::kBF16;
  if (!x.defined() || !(x.dtype() == DType::kF32 || (bf16_ok && x.dtype() == DType::kBF16)) ||
      x.shape().rank() != 3 || x.shape().WithoutBatch() != input_shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "causal_self_attention layer '", name(), "' expects f32", bf16_ok ? " or bf16" : "",
        " input [batch, ", positions_, ", ", features_, "], got ", x.DebugString()));
  }
  Device& device = ctx.device;
  const int64_t batch = x.shape().dim(0);
  const int64_t rows = batch * positions_;
  // Under bf16 storage qkv and O are written as bf16 by the products that make them: they are
  // kept so, and every product that reads them rounds them to bf16 anyway (see Backward).
  const DType inner = AttentionOperandDType(ctx);
  ASSIGN_OR_RETURN(Tensor qkv, Tensor::Empty(device, Shape{batch, positions_, 3 * features_}, inner,
                                             MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor logsumexp, Tensor::Empty(device, Shape{batch, num_heads_, positions_},
                                                   DType::kF32, MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor heads, Tensor::Empty(device, x.shape(), inner, MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(device, x.shape(),
                                           bf16_ok && ctx.bf16_output ? DType::kBF16 : DType::kF32,
                                           MemoryKind::kActivation));

  const ProductPrecision precision = ctx.product_precision;
  RETURN_IF_ERROR(DenseForward(device, x, rows, features_, params[qkv_weight()],
                               bias_ ? &params[qkv_bias()] : nullptr, 3 * features_, qkv,
                               precision));
  // O = softmax(scale q k^T, causal) v per head, fused: no [T, T] block is kept.
  RETURN_IF_ERROR(device.ops().attention.FusedCausalForward(AttentionArgs(batch, precision), qkv,
                                                            heads, logsumexp));
  RETURN_IF_ERROR(DenseForward(device, heads, rows, features_, params[proj_weight()],
                               bias_ ? &params[proj_bias()] : nullptr, features_, y, precision));
  // qkv and O are kept as ctx.saved_activation_dtype. Under bf16 this changes no bits where
  // Backward reads them as product operands (q, k, v in the fused kernel, O in the projection's
  // weight gradient: all rounded to bf16 there), but the fused backward's D = rowsum(dO * O)
  // reads O in f32, and so sees O rounded to bf16 (the forward used the unrounded O nowhere else
  // than in the projection, where it was rounded too). Both are bf16 already under bf16 storage.
  saved.tensors.push_back(x);
  ASSIGN_OR_RETURN(saved.tensors.emplace_back(), StoredActivation(ctx, qkv));
  saved.tensors.push_back(std::move(logsumexp));
  ASSIGN_OR_RETURN(saved.tensors.emplace_back(), StoredActivation(ctx, heads));
  return y;
}

absl::StatusOr<Tensor> CausalSelfAttention::Backward(const LayerContext& ctx,
                                                     std::span<const Tensor> params,
                                                     std::span<Tensor> grads,
                                                     const SavedTensors& saved,
                                                     const Tensor& dy) const {
  GPIPE_CHECK(saved.tensors.size() == 4) << name() << ": Backward without a matching Forward";
  const Tensor& x = saved.tensors[0];
  const ProductPrecision precision = ctx.product_precision;
  const bool bf16_ok = precision == ProductPrecision::kBF16;
  // At kBF16 the fused attention and the products read bf16 qkv and O as they are; otherwise
  // (bf16 saved without bf16 products) they are widened.
  const auto operand = [&](const Tensor& t) -> absl::StatusOr<Tensor> {
    if (bf16_ok) return t;
    return WidenedFromBf16(ctx.device, t, MemoryKind::kWorkspace);
  };
  ASSIGN_OR_RETURN(const Tensor qkv, operand(saved.tensors[1]));
  const Tensor& logsumexp = saved.tensors[2];
  ASSIGN_OR_RETURN(const Tensor heads, operand(saved.tensors[3]));
  if (!dy.defined() || !(dy.dtype() == DType::kF32 || (bf16_ok && dy.dtype() == DType::kBF16)) ||
      dy.shape() != x.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("causal_self_attention layer '", name(),
                                                   "': output gradient ", dy.DebugString(),
                                                   " does not match the input ", x.DebugString()));
  }
  Device& device = ctx.device;
  // dO and dqkv: bf16 under bf16 storage, written so by the products that make them.
  const DType inner = AttentionOperandDType(ctx);
  const int64_t batch = x.shape().dim(0);
  const int64_t rows = batch * positions_;

  // Output projection.
  RETURN_IF_ERROR(DenseParamGrads(device, heads, dy, rows, features_, features_,
                                  grads[proj_weight()], bias_ ? &grads[proj_bias()] : nullptr,
                                  precision));
  ASSIGN_OR_RETURN(Tensor heads_grad,
                   Tensor::Empty(device, x.shape(), inner, MemoryKind::kWorkspace));
  RETURN_IF_ERROR(DenseInputGrad(device, dy, rows, features_, params[proj_weight()], features_,
                                 heads_grad, precision));

  // Attention: P is rebuilt from q, k and the saved log-sum-exp.
  ASSIGN_OR_RETURN(Tensor qkv_grad,
                   Tensor::Empty(device, qkv.shape(), inner, MemoryKind::kWorkspace));
  RETURN_IF_ERROR(device.ops().attention.FusedCausalBackward(
      AttentionArgs(batch, precision), qkv, heads, logsumexp, heads_grad, qkv_grad));

  // qkv projection.
  RETURN_IF_ERROR(DenseParamGrads(device, x, qkv_grad, rows, features_, 3 * features_,
                                  grads[qkv_weight()], bias_ ? &grads[qkv_bias()] : nullptr,
                                  precision));
  if (!ctx.need_input_grad) return Tensor();
  const bool bf16_dx = precision == ProductPrecision::kBF16 && ctx.bf16_input_grad;
  ASSIGN_OR_RETURN(Tensor dx, Tensor::Empty(device, x.shape(), bf16_dx ? DType::kBF16 : DType::kF32,
                                            MemoryKind::kActivation));
  RETURN_IF_ERROR(DenseInputGrad(device, qkv_grad, rows, 3 * features_, params[qkv_weight()],
                                 features_, dx, precision));
  return dx;
}

}  // namespace gpipe
