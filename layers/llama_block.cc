#include "layers/llama_block.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "layers/gated_mlp.h"
#include "layers/llama_attention.h"
#include "layers/residual.h"
#include "layers/rms_norm.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

absl::StatusOr<std::unique_ptr<Layer>> Norm(const char* name, double eps, const Shape& input) {
  pb::Layer spec;
  spec.set_name(name);
  spec.mutable_rms_norm()->set_eps(eps);
  return RmsNorm::Create(spec, input);
}

// y = x + second(first(x)), unnamed: its layers' names are the block's parameter prefixes.
absl::StatusOr<std::unique_ptr<Layer>> Half(absl::StatusOr<std::unique_ptr<Layer>> first,
                                            absl::StatusOr<std::unique_ptr<Layer>> second) {
  std::vector<std::unique_ptr<Layer>> layers;
  ASSIGN_OR_RETURN(layers.emplace_back(), std::move(first));
  ASSIGN_OR_RETURN(layers.emplace_back(), std::move(second));
  ASSIGN_OR_RETURN(LayerSequence body, LayerSequence::Create(std::move(layers)));
  return Residual::Wrap("", std::move(body));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Layer>> LlamaBlock::Create(const pb::Layer& spec,
                                                          const Shape& input_shape) {
  const pb::LlamaBlock& config = spec.llama_block();
  if (input_shape.rank() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("llama_block needs a per-sample input [seq_len, d_model], got ",
                     input_shape.ToString(), "; put an embedding before it"));
  }
  const int64_t width = input_shape.last();
  if (!config.has_num_heads() || config.num_heads() < 1 || width % config.num_heads() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("llama_block.num_heads must be set, >= 1 and divide d_model ", width, ", got ",
                     config.num_heads()));
  }
  const int64_t head_dim = width / config.num_heads();
  if (head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("llama_block: rotary position embedding needs an even head_dim, got d_model ",
                     width, " / num_heads ", config.num_heads(), " = ", head_dim));
  }
  const int64_t kv_heads = config.has_num_kv_heads() ? config.num_kv_heads() : config.num_heads();
  if (kv_heads < 1 || config.num_heads() % kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("llama_block.num_kv_heads must be >= 1 and divide num_heads ",
                     config.num_heads(), ", got ", kv_heads));
  }
  if (!config.has_intermediate_size() || config.intermediate_size() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "llama_block.intermediate_size must be set and >= 1, got ", config.intermediate_size()));
  }
  if (!(config.rope_theta() > 0.0) || !std::isfinite(config.rope_theta())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "llama_block.rope_theta must be a finite number > 0, got ", config.rope_theta()));
  }
  if (!(config.eps() > 0.0) || !std::isfinite(config.eps())) {
    return absl::InvalidArgumentError(
        absl::StrCat("llama_block.eps must be a finite number > 0, got ", config.eps()));
  }

  const LlamaAttentionConfig attention{
      .num_heads = config.num_heads(), .num_kv_heads = kv_heads, .rope_theta = config.rope_theta()};
  std::vector<std::unique_ptr<Layer>> halves;
  ASSIGN_OR_RETURN(halves.emplace_back(),
                   Half(Norm("input_layernorm", config.eps(), input_shape),
                        LlamaAttention::Create("self_attn", input_shape, attention)));
  ASSIGN_OR_RETURN(halves.emplace_back(),
                   Half(Norm("post_attention_layernorm", config.eps(), input_shape),
                        GatedMlp::Create("mlp", input_shape, config.intermediate_size())));
  ASSIGN_OR_RETURN(LayerSequence body, LayerSequence::Create(std::move(halves)));
  return std::unique_ptr<Layer>(new LlamaBlock(spec.name(), std::move(body)));
}

LlamaBlock::LlamaBlock(std::string name, LayerSequence body)
    : Layer(std::move(name), body.input_shape(), body.output_shape()), body_(std::move(body)) {}

// The tensors are checked here, not only by the unnamed residuals inside, so that an error names
// this block.
absl::StatusOr<Tensor> LlamaBlock::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                           const Tensor& x, SavedTensors& saved) const {
  if (!x.defined() || x.dtype() != DType::kF32 || x.shape().rank() < 1 ||
      x.shape().WithoutBatch() != input_shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("llama_block '", name(), "' expects f32 samples of shape ",
                     input_shape().ToString(), ", got ", x.DebugString()));
  }
  return body_.Forward(ctx, params, x, saved);
}

absl::StatusOr<Tensor> LlamaBlock::Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                            std::span<Tensor> grads, const SavedTensors& saved,
                                            const Tensor& dy) const {
  if (!dy.defined() || dy.dtype() != DType::kF32 || dy.shape().rank() < 1 ||
      dy.shape().WithoutBatch() != output_shape()) {
    return absl::InvalidArgumentError(absl::StrCat("llama_block '", name(), "': output gradient ",
                                                   dy.DebugString(), " does not match samples of ",
                                                   output_shape().ToString()));
  }
  return body_.Backward(ctx, params, grads, saved, dy);
}

}  // namespace gpipe
