// The Hugging Face config.json of a Llama plan: every field transformers' LlamaConfig reads, from
// the plan's layers, and a clear refusal of plans that are not a LlamaForCausalLM.
#include "runtime/ckpt/hf_config.h"

#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "runtime/core/json.h"

namespace gpipe {
namespace {

using ::testing::HasSubstr;

constexpr char kBlock[] =
    "llama_block { num_heads: 8 num_kv_heads: 2 intermediate_size: 688 rope_theta: 500000 "
    "eps: 1e-5 }";

std::string LlamaModel(const std::string& extra = "", const std::string& norm_eps = "1e-5") {
  return absl::StrCat(
      "input { shape: [128] type: INT64 }\n"
      "layers { name: 'model.embed_tokens' embedding { num_embeddings: 1024 embedding_dim: 256 } "
      "}\n"
      "layers { name: 'model.layers.0' ",
      kBlock, " }\nlayers { name: 'model.layers.1' ", kBlock,
      " }\nlayers { name: 'model.norm' rms_norm { eps: ", norm_eps,
      " } }\nlayers { name: 'lm_head' linear { out_features: 1024 bias: false } }\n"
      "loss { softmax_cross_entropy {} }\n",
      extra);
}

pb::Model Parse(const std::string& text) {
  pb::Model model;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &model)) << text;
  return model;
}

TEST(HfConfigTest, WritesEveryLlamaConfigFieldFromThePlan) {
  absl::StatusOr<std::string> text = LlamaHfConfigJson(Parse(LlamaModel()), "bfloat16");
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<Json> json = ParseJson(*text, "config.json");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ((*json)["architectures"], Json::array({"LlamaForCausalLM"}));
  EXPECT_EQ((*json)["model_type"], "llama");
  EXPECT_EQ((*json)["vocab_size"], 1024);
  EXPECT_EQ((*json)["hidden_size"], 256);
  EXPECT_EQ((*json)["intermediate_size"], 688);
  EXPECT_EQ((*json)["num_hidden_layers"], 2);
  EXPECT_EQ((*json)["num_attention_heads"], 8);
  EXPECT_EQ((*json)["num_key_value_heads"], 2);
  EXPECT_EQ((*json)["head_dim"], 32);
  EXPECT_EQ((*json)["hidden_act"], "silu");
  EXPECT_EQ((*json)["max_position_embeddings"], 128);
  EXPECT_EQ((*json)["rms_norm_eps"], 1e-5);
  EXPECT_EQ((*json)["rope_theta"], 500000.0);
  EXPECT_EQ((*json)["rope_parameters"]["rope_type"], "default");
  EXPECT_EQ((*json)["rope_parameters"]["rope_theta"], 500000.0);
  EXPECT_EQ((*json)["attention_bias"], false);
  EXPECT_EQ((*json)["mlp_bias"], false);
  EXPECT_EQ((*json)["tie_word_embeddings"], false);
  EXPECT_EQ((*json)["torch_dtype"], "bfloat16");
  EXPECT_EQ(text->back(), '\n');
}

TEST(HfConfigTest, TiedHeadAndDefaultKeyValueHeads) {
  std::string text = LlamaModel("ties { parameters: ['model.embed_tokens.weight', "
                                "'lm_head.weight'] }\n");
  absl::StrReplaceAll({{"num_kv_heads: 2 ", ""}}, &text);
  absl::StatusOr<std::string> config = LlamaHfConfigJson(Parse(text), "float32");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<Json> json = ParseJson(*config, "config.json");
  ASSERT_TRUE(json.ok());
  EXPECT_EQ((*json)["tie_word_embeddings"], true);
  EXPECT_EQ((*json)["num_key_value_heads"], 8);
  EXPECT_EQ((*json)["torch_dtype"], "float32");
}

TEST(HfConfigTest, RefusesModelsThatAreNotLlamaNamingTheLayer) {
  const struct {
    std::string model;
    std::string message;
  } cases[] = {
      {absl::StrReplaceAll(LlamaModel(), {{"'model.layers.1'", "'model.layers.2'"}}),
       "layer 2 is 'model.layers.2', not the llama_block model.layers.1"},
      {absl::StrReplaceAll(LlamaModel(), {{"'model.embed_tokens'", "'embed'"}}),
       "the first layer is 'embed', not the embedding model.embed_tokens"},
      {LlamaModel("", "1e-6"), "model.norm's eps 1e-06 differs from the blocks' 1e-05"},
      {absl::StrReplaceAll(LlamaModel(), {{"bias: false", "bias: true"}}),
       "the last layer is 'lm_head', not lm_head (linear, bias: false, out_features 1024)"},
      {absl::StrReplaceAll(LlamaModel(), {{"type: INT64", "type: FLOAT32"}}),
       "model.input is not { type: INT64 shape: [seq_len] }"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message);
    absl::StatusOr<std::string> config = LlamaHfConfigJson(Parse(c.model), "float32");
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(c.message));
    EXPECT_THAT(std::string(config.status().message()), HasSubstr("not a LlamaForCausalLM"));
  }
  // Blocks that differ cannot share one config.
  std::string differing = LlamaModel();
  const size_t second = differing.find("intermediate_size: 688", differing.find("model.layers.1"));
  differing.replace(second, 22, "intermediate_size: 512");
  absl::StatusOr<std::string> config = LlamaHfConfigJson(Parse(differing), "float32");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("'model.layers.1' differs from 'model.layers.0'"));
}

}  // namespace
}  // namespace gpipe
