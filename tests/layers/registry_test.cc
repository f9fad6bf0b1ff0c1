// LayerRegistry::WithBuiltins: builds every plan layer kind with the right shapes and
// parameters, rejects unknown, missing and badly configured kinds with messages naming the
// field, and lets embedders register their own kinds.
#include "layers/registry.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "layers/linear.h"
#include "tests/layers/make_layer.h"

namespace gpipe::testing {
namespace {

using ::testing::HasSubstr;

struct KindCase {
  std::string spec;
  std::string kind;
  Shape input;
  Shape output;
  std::vector<std::string> params;
};

TEST(LayerRegistryTest, BuildsEveryKindInThePlanWithItsShapes) {
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  const std::vector<KindCase> cases = {
      {"name: 'a' linear { out_features: 7 }",
       "linear",
       Shape{3, 5},
       Shape{3, 7},
       {"weight", "bias"}},
      {"name: 'a' relu {}", "relu", Shape{3, 5}, Shape{3, 5}, {}},
      {"name: 'a' gelu {}", "gelu", Shape{5}, Shape{5}, {}},
      {"name: 'a' tanh {}", "tanh", Shape{5}, Shape{5}, {}},
      {"name: 'a' layer_norm {}", "layer_norm", Shape{2, 5}, Shape{2, 5}, {"weight", "bias"}},
      {"name: 'a' dropout {}", "dropout", Shape{5}, Shape{5}, {}},
      {"name: 'a' conv2d { out_channels: 4 kernel_size: 3 padding: 1 }",
       "conv2d",
       Shape{2, 6, 5},
       Shape{4, 6, 5},
       {"weight", "bias"}},
      {"name: 'a' max_pool2d { kernel_size: 2 }", "max_pool2d", Shape{2, 6, 4}, Shape{2, 3, 2}, {}},
      {"name: 'a' avg_pool2d { kernel_size: 3 stride: 1 }",
       "avg_pool2d",
       Shape{2, 5, 5},
       Shape{2, 3, 3},
       {}},
      {"name: 'a' global_avg_pool2d {}", "global_avg_pool2d", Shape{2, 6, 5}, Shape{2}, {}},
      {"name: 'a' flatten {}", "flatten", Shape{2, 6, 5}, Shape{60}, {}},
      {"name: 'a' batch_norm1d {}", "batch_norm1d", Shape{3, 5}, Shape{3, 5}, {"weight", "bias"}},
      {"name: 'a' batch_norm2d {}",
       "batch_norm2d",
       Shape{3, 4, 4},
       Shape{3, 4, 4},
       {"weight", "bias"}},
      {"name: 'a' residual { layers { name: 'fc' linear { out_features: 5 } }"
       " layers { name: 'act' relu {} } }",
       "residual",
       Shape{3, 5},
       Shape{3, 5},
       {"fc.weight", "fc.bias"}},
      {"name: 'a' embedding { num_embeddings: 10 embedding_dim: 4 }",
       "embedding",
       Shape{5},
       Shape{5, 4},
       {"weight"}},
      {"name: 'a' positional_embedding { max_positions: 8 }",
       "positional_embedding",
       Shape{5, 4},
       Shape{5, 4},
       {"weight"}},
      {"name: 'a' causal_self_attention { num_heads: 2 }",
       "causal_self_attention",
       Shape{5, 4},
       Shape{5, 4},
       {"qkv.weight", "qkv.bias", "proj.weight", "proj.bias"}},
      {"name: 'a' transformer_block { num_heads: 2 }",
       "transformer_block",
       Shape{5, 4},
       Shape{5, 4},
       {"ln_1.weight", "ln_1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight",
        "attn.proj.bias", "ln_2.weight", "ln_2.bias", "mlp.fc.weight", "mlp.fc.bias",
        "mlp.proj.weight", "mlp.proj.bias"}},
      {"name: 'a' rms_norm {}", "rms_norm", Shape{5, 4}, Shape{5, 4}, {"weight"}},
      {"name: 'a' llama_block { num_heads: 2 num_kv_heads: 1 intermediate_size: 6 }",
       "llama_block",
       Shape{5, 4},
       Shape{5, 4},
       {"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
        "self_attn.v_proj.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
        "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"}},
  };
  // Every oneof member of pb::Layer's `kind` has a case here and a factory in the registry,
  // except `custom`, whose types a program registers (tests/api), and the skip joins, which the
  // registry builds with the shape of the output they read (skip_join_test.cc).
  const auto* oneof = pb::Layer::descriptor()->FindOneofByName("kind");
  const auto is_join = [](std::string_view kind) {
    return kind == "skip_add" || kind == "skip_concat";
  };
  ASSERT_EQ(oneof->field_count() - 3, static_cast<int>(cases.size()));
  for (int i = 0; i < oneof->field_count(); ++i) {
    if (oneof->field(i)->name() == "custom" || is_join(oneof->field(i)->name())) continue;
    EXPECT_TRUE(registry.Contains(std::string(oneof->field(i)->name()))) << oneof->field(i)->name();
  }
  for (const KindCase& c : cases) {
    SCOPED_TRACE(c.spec);
    const pb::Layer spec = ParseLayer(c.spec);
    EXPECT_EQ(LayerRegistry::KindOf(spec), c.kind);
    absl::StatusOr<std::unique_ptr<Layer>> layer = registry.Create(spec, c.input);
    ASSERT_TRUE(layer.ok()) << layer.status();
    EXPECT_EQ((*layer)->type(), c.kind);
    EXPECT_EQ((*layer)->name(), "a");
    EXPECT_EQ((*layer)->input_shape(), c.input);
    EXPECT_EQ((*layer)->output_shape(), c.output);
    if (c.kind == "flatten") {
      EXPECT_EQ((*layer)->ForwardFlopsPerSample(), 0.0);  // a view: no arithmetic
    } else {
      EXPECT_GT((*layer)->ForwardFlopsPerSample(), 0.0);
    }
    std::vector<std::string> names;
    for (const ParamSpec& p : (*layer)->parameter_specs()) names.push_back(p.name);
    EXPECT_EQ(names, c.params);
  }
}

TEST(LayerRegistryTest, RejectsALayerWithoutAKind) {
  absl::StatusOr<std::unique_ptr<Layer>> layer =
      LayerRegistry::WithBuiltins().Create(ParseLayer("name: 'a'"), Shape{4});
  ASSERT_FALSE(layer.ok());
  EXPECT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(layer.status().message()), HasSubstr("has no kind"));
}

TEST(LayerRegistryTest, RejectsAKindWithoutAFactory) {
  LayerRegistry empty;
  absl::StatusOr<std::unique_ptr<Layer>> layer =
      empty.Create(ParseLayer("name: 'a' relu {}"), Shape{4});
  ASSERT_FALSE(layer.ok());
  EXPECT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(layer.status().message(), "layer kind 'relu' is not registered");
}

TEST(LayerRegistryTest, RejectsBadConfigurationNamingTheField) {
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"name: 'a' dropout { p: 1.5 }", "dropout.p must be in [0, 1), got 1.5"},
      {"name: 'a' layer_norm { eps: 0 }", "layer_norm.eps must be > 0"},
      {"name: 'a' linear { out_features: 0 }", "linear.out_features must be set and >= 1"},
  };
  for (const auto& [text, message] : cases) {
    SCOPED_TRACE(text);
    absl::StatusOr<std::unique_ptr<Layer>> layer = registry.Create(ParseLayer(text), Shape{4});
    ASSERT_FALSE(layer.ok());
    EXPECT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(layer.status().message()), HasSubstr(message));
  }
}

TEST(LayerRegistryTest, RejectsAnInputShapeALayerCannotTake) {
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  for (const char* text : {"name: 'a' linear { out_features: 2 }", "name: 'a' layer_norm {}"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<std::unique_ptr<Layer>> layer = registry.Create(ParseLayer(text), Shape{});
    ASSERT_FALSE(layer.ok());
    EXPECT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(layer.status().message()), HasSubstr("last dimension"));
  }
}

TEST(LayerRegistryTest, EmbeddersRegisterTheirOwnKindsButNotTakenOnes) {
  LayerRegistry registry = LayerRegistry::WithBuiltins();
  const absl::Status taken = registry.Register("relu", &Linear::Create);
  EXPECT_EQ(taken.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(taken.message()), HasSubstr("'relu' is already registered"));
  EXPECT_TRUE(registry.Register("my_linear", &Linear::Create).ok());
  EXPECT_TRUE(registry.Contains("my_linear"));
  EXPECT_FALSE(registry.Contains("conv3d"));
}

}  // namespace
}  // namespace gpipe::testing
