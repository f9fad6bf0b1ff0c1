#include "layers/llama_attention.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "layers/bf16_tensors.h"
#include "layers/dense.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {
namespace {

// transformers' initializer_range default for Llama.
constexpr double kInitStddev = 0.02;

}  // namespace

absl::StatusOr<std::unique_ptr<Layer>> LlamaAttention::Create(std::string name,
                                                              const Shape& input_shape,
                                                              const LlamaAttentionConfig& config) {
  if (input_shape.rank() != 2 || input_shape.dim(0) < 1 || input_shape.dim(1) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "llama attention needs a per-sample input [T, D], got ", input_shape.ToString()));
  }
  const int64_t width = input_shape.dim(1);
  if (config.num_heads < 1 || width % config.num_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_heads must be >= 1 and divide d_model ",
                                                   width, ", got ", config.num_heads));
  }
  const int64_t head_dim = width / config.num_heads;
  if (head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rotary position embedding needs an even head_dim, got d_model ", width,
                     " / num_heads ", config.num_heads, " = ", head_dim));
  }
  if (config.num_kv_heads < 1 || config.num_heads % config.num_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_kv_heads must be >= 1 and divide num_heads ", config.num_heads, ", got ",
                     config.num_kv_heads));
  }
  if (!(config.rope_theta > 0.0) || !std::isfinite(config.rope_theta)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rope_theta must be a finite number > 0, got ", config.rope_theta));
  }
  return std::unique_ptr<Layer>(new LlamaAttention(std::move(name), input_shape, config));
}

LlamaAttention::LlamaAttention(std::string name, const Shape& input_shape,
                               const LlamaAttentionConfig& config)
    : Layer(std::move(name), input_shape, input_shape),
      positions_(input_shape.dim(0)),
      features_(input_shape.dim(1)),
      head_dim_(input_shape.dim(1) / config.num_heads),
      kv_width_(config.num_kv_heads * (input_shape.dim(1) / config.num_heads)),
      config_(config) {}

std::vector<ParamSpec> LlamaAttention::parameter_specs() const {
  // Each weight enters only its product.
  constexpr bool kProduct = true;
  return {
      {"q_proj.weight", Shape{features_, features_}, ParamInit::kNormal, kInitStddev, kProduct},
      {"k_proj.weight", Shape{kv_width_, features_}, ParamInit::kNormal, kInitStddev, kProduct},
      {"v_proj.weight", Shape{kv_width_, features_}, ParamInit::kNormal, kInitStddev, kProduct},
      {"o_proj.weight", Shape{features_, features_}, ParamInit::kNormal, kInitStddev, kProduct}};
}

double LlamaAttention::ForwardFlopsPerSample() const {
  const double t = static_cast<double>(positions_);
  const double d = static_cast<double>(features_);
  const double kv = static_cast<double>(kv_width_);
  // q, k, v and o projections; scores and P v over the full T x T, as causal_self_attention.
  return 2.0 * t * d * d + 2.0 * 2.0 * t * d * kv + 2.0 * t * t * d + 2.0 * t * t * d +
         2.0 * t * d * d;
}

std::vector<SavedSpec> LlamaAttention::SavedPerSample() const {
  const int64_t f32 = SizeOf(DType::kF32);
  return {{SavedRef::kInput},
          {.ref = SavedRef::kNew, .activation_elements_per_sample = positions_ * features_},
          {.ref = SavedRef::kNew, .activation_elements_per_sample = positions_ * kv_width_},
          {.ref = SavedRef::kNew, .activation_elements_per_sample = positions_ * kv_width_},
          {.ref = SavedRef::kNew, .bytes_per_sample = config_.num_heads * positions_ * f32},
          {.ref = SavedRef::kNew, .activation_elements_per_sample = positions_ * features_}};
}

RotaryQkvArgs LlamaAttention::RotaryArgs(int64_t batch) const {
  return {.batch = batch,
          .t = positions_,
          .heads = config_.num_heads,
          .kv_heads = config_.num_kv_heads,
          .head_dim = head_dim_,
          .rope_theta = config_.rope_theta};
}

FusedAttentionArgs LlamaAttention::AttentionArgs(int64_t batch, ProductPrecision precision) const {
  return {.batch = batch,
          .t = positions_,
          .heads = config_.num_heads,
          .head_dim = head_dim_,
          .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_))),
          .precision = precision};
}

absl::StatusOr<Tensor> LlamaAttention::Packed(Device& device, const Tensor& q, const Tensor& k,
                                              const Tensor& v, DType dtype) const {
  const int64_t batch = q.shape().dim(0);
  ASSIGN_OR_RETURN(Tensor qkv, Tensor::Empty(device, Shape{batch, positions_, 3 * features_}, dtype,
                                             MemoryKind::kWorkspace));
  RETURN_IF_ERROR(device.ops().attention.PackRotaryQkv(RotaryArgs(batch), q, k, v, qkv));
  return qkv;
}

absl::StatusOr<Tensor> LlamaAttention::Forward(const LayerContext& ctx,
                                               std::span<const Tensor> params, const Tensor& x,
                                               SavedTensors& saved) const {
  if (!x.defined() || x.dtype() != DType::kF32 || x.shape().rank() != 3 ||
      x.shape().WithoutBatch() != input_shape()) {
    return absl::InvalidArgumentError(absl::StrCat("llama attention '", name(),
                                                   "' expects f32 input [batch, ", positions_, ", ",
                                                   features_, "], got ", x.DebugString()));
  }
  Device& device = ctx.device;
  const ProductPrecision precision = ctx.product_precision;
  const int64_t batch = x.shape().dim(0);
  const int64_t rows = batch * positions_;
  const Shape kv_shape{batch, positions_, kv_width_};
  ASSIGN_OR_RETURN(Tensor q,
                   Tensor::Empty(device, x.shape(), DType::kF32, MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor k, Tensor::Empty(device, kv_shape, DType::kF32, MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor v, Tensor::Empty(device, kv_shape, DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(
      DenseForward(device, x, rows, features_, params[kQ], nullptr, features_, q, precision));
  RETURN_IF_ERROR(
      DenseForward(device, x, rows, features_, params[kK], nullptr, kv_width_, k, precision));
  RETURN_IF_ERROR(
      DenseForward(device, x, rows, features_, params[kV], nullptr, kv_width_, v, precision));

  // Under bf16 storage the packed qkv and O are bf16, written rounded by the ops that make them
  // (the fused attention rounded its q, k, v operands, and the output projection O, anyway).
  const DType inner = AttentionOperandDType(ctx);
  ASSIGN_OR_RETURN(Tensor heads, Tensor::Empty(device, x.shape(), inner, MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor logsumexp,
                   Tensor::Empty(device, Shape{batch, config_.num_heads, positions_}, DType::kF32,
                                 MemoryKind::kActivation));
  {
    ASSIGN_OR_RETURN(const Tensor qkv, Packed(device, q, k, v, inner));
    RETURN_IF_ERROR(device.ops().attention.FusedCausalForward(AttentionArgs(batch, precision), qkv,
                                                              heads, logsumexp));
  }
  ASSIGN_OR_RETURN(Tensor y,
                   Tensor::Empty(device, x.shape(), DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(
      DenseForward(device, heads, rows, features_, params[kO], nullptr, features_, y, precision));
  saved.tensors.push_back(x);
  ASSIGN_OR_RETURN(saved.tensors.emplace_back(), StoredActivation(ctx, q));
  ASSIGN_OR_RETURN(saved.tensors.emplace_back(), StoredActivation(ctx, k));
  ASSIGN_OR_RETURN(saved.tensors.emplace_back(), StoredActivation(ctx, v));
  saved.tensors.push_back(std::move(logsumexp));
  ASSIGN_OR_RETURN(saved.tensors.emplace_back(), StoredActivation(ctx, heads));
  return y;
}

absl::StatusOr<Tensor> LlamaAttention::Backward(const LayerContext& ctx,
                                                std::span<const Tensor> params,
                                                std::span<Tensor> grads, const SavedTensors& saved,
                                                const Tensor& dy) const {
  GPIPE_CHECK(saved.tensors.size() == 6) << name() << ": Backward without a matching Forward";
  const Tensor& x = saved.tensors[0];
  if (!dy.defined() || dy.dtype() != DType::kF32 || dy.shape() != x.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("llama attention '", name(),
                                                   "': output gradient ", dy.DebugString(),
                                                   " does not match the input ", x.DebugString()));
  }
  Device& device = ctx.device;
  const ProductPrecision precision = ctx.product_precision;
  const int64_t batch = x.shape().dim(0);
  const int64_t rows = batch * positions_;
  // At kBF16 the products and the fused attention read a bf16 O as it is; otherwise (bf16 saved
  // without bf16 products) it is widened. dO and dqkv are bf16 under bf16 storage, written
  // rounded by the ops that make them.
  const DType inner = AttentionOperandDType(ctx);
  ASSIGN_OR_RETURN(const Tensor heads,
                   precision == ProductPrecision::kBF16
                       ? absl::StatusOr<Tensor>(saved.tensors[5])
                       : WidenedFromBf16(device, saved.tensors[5], MemoryKind::kWorkspace));

  // Output projection.
  RETURN_IF_ERROR(DenseParamGrads(device, heads, dy, rows, features_, features_, grads[kO], nullptr,
                                  precision));
  ASSIGN_OR_RETURN(Tensor heads_grad,
                   Tensor::Empty(device, x.shape(), inner, MemoryKind::kWorkspace));
  RETURN_IF_ERROR(
      DenseInputGrad(device, dy, rows, features_, params[kO], features_, heads_grad, precision));

  // Attention, on q, k, v packed again; then back to q, k and v's own layouts.
  const Shape kv_shape{batch, positions_, kv_width_};
  ASSIGN_OR_RETURN(Tensor dq,
                   Tensor::Empty(device, x.shape(), DType::kF32, MemoryKind::kWorkspace));
  ASSIGN_OR_RETURN(Tensor dk, Tensor::Empty(device, kv_shape, DType::kF32, MemoryKind::kWorkspace));
  ASSIGN_OR_RETURN(Tensor dv, Tensor::Empty(device, kv_shape, DType::kF32, MemoryKind::kWorkspace));
  {
    ASSIGN_OR_RETURN(const Tensor q,
                     WidenedFromBf16(device, saved.tensors[1], MemoryKind::kWorkspace));
    ASSIGN_OR_RETURN(const Tensor k,
                     WidenedFromBf16(device, saved.tensors[2], MemoryKind::kWorkspace));
    ASSIGN_OR_RETURN(const Tensor v,
                     WidenedFromBf16(device, saved.tensors[3], MemoryKind::kWorkspace));
    ASSIGN_OR_RETURN(const Tensor qkv, Packed(device, q, k, v, inner));
    ASSIGN_OR_RETURN(Tensor qkv_grad,
                     Tensor::Empty(device, qkv.shape(), inner, MemoryKind::kWorkspace));
    RETURN_IF_ERROR(device.ops().attention.FusedCausalBackward(
        AttentionArgs(batch, precision), qkv, heads, saved.tensors[4], heads_grad, qkv_grad));
    RETURN_IF_ERROR(
        device.ops().attention.UnpackRotaryQkvGrad(RotaryArgs(batch), qkv_grad, dq, dk, dv));
  }

  // q, k and v projections: dx = dq Wq + dk Wk + dv Wv, summed in that order.
  RETURN_IF_ERROR(
      DenseParamGrads(device, x, dq, rows, features_, features_, grads[kQ], nullptr, precision));
  RETURN_IF_ERROR(
      DenseParamGrads(device, x, dk, rows, features_, kv_width_, grads[kK], nullptr, precision));
  RETURN_IF_ERROR(
      DenseParamGrads(device, x, dv, rows, features_, kv_width_, grads[kV], nullptr, precision));
  if (!ctx.need_input_grad) return Tensor();
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(device, x.shape(), DType::kF32, MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor part,
                   Tensor::Empty(device, x.shape(), DType::kF32, MemoryKind::kWorkspace));
  RETURN_IF_ERROR(
      DenseInputGrad(device, dq, rows, features_, params[kQ], features_, dx, precision));
  RETURN_IF_ERROR(
      DenseInputGrad(device, dk, rows, kv_width_, params[kK], features_, part, precision));
  RETURN_IF_ERROR(device.ops().tensor.Add(dx, part, dx));
  RETURN_IF_ERROR(
      DenseInputGrad(device, dv, rows, kv_width_, params[kV], features_, part, precision));
  RETURN_IF_ERROR(device.ops().tensor.Add(dx, part, dx));
  return dx;
}

}  // namespace gpipe
