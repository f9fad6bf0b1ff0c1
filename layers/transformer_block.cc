#include "layers/transformer_block.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "layers/residual.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// Builds `specs` in order from `input_shape` into one sequence.
absl::StatusOr<LayerSequence> Build(const std::vector<pb::Layer>& specs, const Shape& input_shape,
                                    InnerLayerBuilder build_inner) {
  std::vector<std::unique_ptr<Layer>> layers;
  Shape current = input_shape;
  for (const pb::Layer& spec : specs) {
    auto layer = build_inner(spec, current);
    if (!layer.ok()) return WithContext(layer.status(), spec.name());
    current = (*layer)->output_shape();
    layers.push_back(*std::move(layer));
  }
  return LayerSequence::Create(std::move(layers));
}

pb::Layer Named(const std::string& name) {
  pb::Layer layer;
  layer.set_name(name);
  return layer;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Layer>> TransformerBlock::Create(const pb::Layer& spec,
                                                                const Shape& input_shape,
                                                                InnerLayerBuilder build_inner) {
  const pb::TransformerBlock& config = spec.transformer_block();
  if (input_shape.rank() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transformer_block needs a per-sample input [seq_len, d_model], got ",
        input_shape.ToString(), "; put an embedding (and positional_embedding) before it"));
  }
  const int64_t width = input_shape.last();
  if (!config.has_num_heads() || config.num_heads() < 1 || width % config.num_heads() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer_block.num_heads must be set, >= 1 and divide d_model ", width,
                     ", got ", config.num_heads()));
  }
  if (config.mlp_ratio() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer_block.mlp_ratio must be >= 1, got ", config.mlp_ratio()));
  }
  if (!(config.eps() > 0.0) || !std::isfinite(config.eps())) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer_block.eps must be a finite number > 0, got ", config.eps()));
  }

  pb::Layer ln_1 = Named("ln_1");
  ln_1.mutable_layer_norm()->set_eps(config.eps());
  pb::Layer attn = Named("attn");
  attn.mutable_causal_self_attention()->set_num_heads(config.num_heads());
  pb::Layer ln_2 = Named("ln_2");
  ln_2.mutable_layer_norm()->set_eps(config.eps());
  pb::Layer fc = Named("mlp.fc");
  fc.mutable_linear()->set_out_features(config.mlp_ratio() * width);
  pb::Layer act = Named("mlp.gelu");
  act.mutable_gelu();
  pb::Layer proj = Named("mlp.proj");
  proj.mutable_linear()->set_out_features(width);

  ASSIGN_OR_RETURN(LayerSequence attention, Build({ln_1, attn}, input_shape, build_inner));
  ASSIGN_OR_RETURN(LayerSequence mlp, Build({ln_2, fc, act, proj}, input_shape, build_inner));
  // The residuals are unnamed: their layers' names are the block's parameter prefixes.
  std::vector<std::unique_ptr<Layer>> halves;
  ASSIGN_OR_RETURN(halves.emplace_back(), Residual::Wrap("", std::move(attention)));
  ASSIGN_OR_RETURN(halves.emplace_back(), Residual::Wrap("", std::move(mlp)));
  ASSIGN_OR_RETURN(LayerSequence body, LayerSequence::Create(std::move(halves)));
  return std::unique_ptr<Layer>(new TransformerBlock(spec.name(), std::move(body)));
}

TransformerBlock::TransformerBlock(std::string name, LayerSequence body)
    : Layer(std::move(name), body.input_shape(), body.output_shape()), body_(std::move(body)) {}

// The tensors are checked here, not only by the unnamed residuals inside, so that an error names
// this block.
absl::StatusOr<Tensor> TransformerBlock::Forward(const LayerContext& ctx,
                                                 std::span<const Tensor> params, const Tensor& x,
                                                 SavedTensors& saved) const {
  if (!x.defined() || x.dtype() != DType::kF32 || x.shape().rank() < 1 ||
      x.shape().WithoutBatch() != input_shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer_block '", name(), "' expects f32 samples of shape ",
                     input_shape().ToString(), ", got ", x.DebugString()));
  }
  return body_.Forward(ctx, params, x, saved);
}

absl::StatusOr<Tensor> TransformerBlock::Backward(const LayerContext& ctx,
                                                  std::span<const Tensor> params,
                                                  std::span<Tensor> grads,
                                                  const SavedTensors& saved,
                                                  const Tensor& dy) const {
  if (!dy.defined() || dy.dtype() != DType::kF32 || dy.shape().rank() < 1 ||
      dy.shape().WithoutBatch() != output_shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer_block '", name(), "': output gradient ", dy.DebugString(),
                     " does not match samples of ", output_shape().ToString()));
  }
  return body_.Backward(ctx, params, grads, saved, dy);
}

}  // namespace gpipe
