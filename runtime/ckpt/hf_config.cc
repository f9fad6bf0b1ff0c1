#include "runtime/ckpt/hf_config.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "runtime/core/json.h"

namespace gpipe {
namespace {

absl::Status NotLlama(const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("the model is not a LlamaForCausalLM: ", why,
                   " (expected layers model.embed_tokens (embedding), model.layers.0 ... "
                   "(llama_block), model.norm (rms_norm), lm_head (linear, bias: false))"));
}

std::string Text(const pb::LlamaBlock& block) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(block, &text);
  return text;
}

bool TiedHead(const pb::Model& model) {
  for (const pb::Tie& tie : model.ties()) {
    bool embed = false, head = false;
    for (const std::string& name : tie.parameters()) {
      embed = embed || name == "model.embed_tokens.weight";
      head = head || name == "lm_head.weight";
    }
    if (embed && head) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::string> LlamaHfConfigJson(const pb::Model& model,
                                              const std::string& torch_dtype) {
  const int layers = model.layers_size();
  if (layers < 4) return NotLlama(absl::StrCat("it has ", layers, " layers, not at least 4"));
  if (model.input().shape_size() != 1 || model.input().type() != pb::INT64) {
    return NotLlama("model.input is not { type: INT64 shape: [seq_len] }");
  }
  const pb::Layer& embed = model.layers(0);
  if (embed.name() != "model.embed_tokens" || !embed.has_embedding()) {
    return NotLlama(absl::StrCat("the first layer is '", embed.name(),
                                 "', not the embedding model.embed_tokens"));
  }
  const pb::Layer& first_block = model.layers(1);
  for (int i = 1; i < layers - 2; ++i) {
    const pb::Layer& layer = model.layers(i);
    const std::string expected = absl::StrCat("model.layers.", i - 1);
    if (layer.name() != expected || !layer.has_llama_block()) {
      return NotLlama(absl::StrCat("layer ", i, " is '", layer.name(), "', not the llama_block ",
                                   expected));
    }
    if (Text(layer.llama_block()) != Text(first_block.llama_block())) {
      return NotLlama(absl::StrCat("'", layer.name(), "' differs from '", first_block.name(),
                                   "' (Hugging Face's config has one setting for every block)"));
    }
  }
  const pb::Layer& norm = model.layers(layers - 2);
  const pb::LlamaBlock& block = first_block.llama_block();
  if (norm.name() != "model.norm" || !norm.has_rms_norm()) {
    return NotLlama(absl::StrCat("the layer before the head is '", norm.name(),
                                 "', not the rms_norm model.norm"));
  }
  if (norm.rms_norm().eps() != block.eps()) {
    return NotLlama(absl::StrCat("model.norm's eps ", norm.rms_norm().eps(),
                                 " differs from the blocks' ", block.eps(),
                                 " (Hugging Face's config has one rms_norm_eps)"));
  }
  const pb::Layer& head = model.layers(layers - 1);
  const int64_t vocab = embed.embedding().num_embeddings();
  if (head.name() != "lm_head" || !head.has_linear() || head.linear().bias() ||
      head.linear().out_features() != vocab) {
    return NotLlama(absl::StrCat("the last layer is '", head.name(),
                                 "', not lm_head (linear, bias: false, out_features ", vocab,
                                 ")"));
  }
  const int64_t hidden = embed.embedding().embedding_dim();
  const int64_t heads = block.num_heads();
  Json config = Json::object();
  config["architectures"] = Json::array({"LlamaForCausalLM"});
  config["model_type"] = "llama";
  config["vocab_size"] = vocab;
  config["hidden_size"] = hidden;
  config["intermediate_size"] = block.intermediate_size();
  config["num_hidden_layers"] = layers - 3;
  config["num_attention_heads"] = heads;
  config["num_key_value_heads"] = block.has_num_kv_heads() ? block.num_kv_heads() : heads;
  config["head_dim"] = heads > 0 ? hidden / heads : 0;
  config["hidden_act"] = "silu";
  config["max_position_embeddings"] = model.input().shape(0);
  config["rms_norm_eps"] = block.eps();
  // transformers 4 reads rope_theta, 5 rope_parameters; each ignores the other.
  config["rope_theta"] = block.rope_theta();
  config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", block.rope_theta()}};
  config["attention_bias"] = false;
  config["mlp_bias"] = false;
  config["tie_word_embeddings"] = TiedHead(model);
  config["torch_dtype"] = torch_dtype;
  return config.dump(2) + "\n";
}

}  // namespace gpipe
