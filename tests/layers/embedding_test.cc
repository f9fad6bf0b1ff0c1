// embedding and positional_embedding against independently computed values
// (tests/layers/oracles/attention_oracles.py), finite differences, and their configuration,
// shape and id rules.
#include <cmath>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/gradient_check.h"
#include "tests/layers/make_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

using ::testing::AllOf;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

// Element i is (((7 i + 3 salt) mod 17) - 8) * scale, as in attention_oracles.py.
Tensor PatternTensor(Device& device, const Shape& shape, int salt, double scale) {
  std::vector<float> values(shape.num_elements());
  for (int64_t i = 0; i < shape.num_elements(); ++i) {
    values[i] = static_cast<float>(static_cast<double>((7 * i + 3 * salt) % 17 - 8) * scale);
  }
  return F32Tensor(device, shape, values);
}

absl::Status CreateStatus(const std::string& text, const Shape& input_shape) {
  return LayerRegistry::WithBuiltins().Create(ParseLayer(text), input_shape).status();
}

// ---- embedding ------------------------------------------------------------------------------

TEST(EmbeddingTest, ForwardAndBackwardMatchIndependentValues) {
  CpuDevice device;
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'wte' embedding { num_embeddings: 5 embedding_dim: 3 }", Shape{3});
  const std::vector<Tensor> params = {PatternTensor(device, Shape{5, 3}, 1, 0.1)};
  const Tensor ids = I64Tensor(device, Shape{2, 3}, {1, 4, 1, 0, 2, 4});
  LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, ids, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 3, 3}));
  EXPECT_THAT(Values(*y), Pointwise(FloatNear(1e-7),
                                    {-0.1f, 0.6f, -0.4f, -0.6f, 0.1f, 0.8f, -0.1f, 0.6f, -0.4f,
                                     -0.5f, 0.2f, -0.8f, 0.3f, -0.7f, 0.0f, -0.6f, 0.1f, 0.8f}));

  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  absl::StatusOr<Tensor> dx =
      layer->Backward(ctx, params, grads, saved, PatternTensor(device, Shape{2, 3, 3}, 2, 0.1));
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_FALSE(dx->defined()) << "token ids have no gradient";
  // Row 1 and row 4 each receive two positions' gradients; row 3 none.
  EXPECT_THAT(Values(grads[0]),
              Pointwise(FloatNear(1e-6), {-0.7f, 0.0f, 0.7f, 0.4f, 0.1f, -0.2f, -0.3f, 0.4f, -0.6f,
                                          0.0f, 0.0f, 0.0f, 0.3f, 0.0f, -0.3f}));
}

TEST(EmbeddingTest, WeightGradientMatchesCentralDifferences) {
  CpuDevice device;
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'wte' embedding { num_embeddings: 6 embedding_dim: 4 }", Shape{5});
  const std::vector<Tensor> params = UniformParams(*layer, device, 7);
  // Repeated ids, and id 3 absent: its row's gradient must stay untouched.
  const Tensor ids = I64Tensor(device, Shape{3, 5}, {0, 1, 2, 2, 5, 5, 4, 0, 1, 1, 2, 0, 4, 4, 5});
  LayerContext ctx{.device = device, .need_input_grad = false};
  absl::StatusOr<GradientCheckReport> report = CheckLayerGradients(*layer, ctx, params, ids);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->checked, 6 * 4);
  EXPECT_TRUE(report->ok()) << report->ToString();
}

TEST(EmbeddingTest, RejectsAnIdOutsideTheTableNamingSamplePositionAndRange) {
  CpuDevice device;
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'wte' embedding { num_embeddings: 5 embedding_dim: 3 }", Shape{3});
  const std::vector<Tensor> params = UniformParams(*layer, device, 1);
  LayerContext ctx{.device = device, .micro_batch = 1, .sample_offset = 4};
  SavedTensors saved;
  absl::StatusOr<Tensor> y =
      layer->Forward(ctx, params, I64Tensor(device, Shape{2, 3}, {0, 1, 2, 3, 4, 5}), saved);
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(y.status().message()),
              AllOf(HasSubstr("'wte'"), HasSubstr("sample 5"), HasSubstr("micro-batch 1"),
                    HasSubstr("position 2"), HasSubstr("token id 5"), HasSubstr("[0, 5)"),
                    HasSubstr("embedding.num_embeddings")));
  y = layer->Forward(ctx, params, I64Tensor(device, Shape{1, 3}, {0, -1, 2}), saved);
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(std::string(y.status().message()),
              AllOf(HasSubstr("sample 4"), HasSubstr("position 1"), HasSubstr("token id -1")));
  EXPECT_TRUE(saved.tensors.empty()) << "a rejected Forward saves nothing";
}

// The data path's check (before the upload) gives, for the ids Forward would reject, exactly
// Forward's error: the first bad id, wherever it sits, including -1 and num_embeddings itself.
TEST(EmbeddingTest, HostInputCheckGivesForwardsErrorForTheFirstBadId) {
  CpuDevice device;
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'wte' embedding { num_embeddings: 5 embedding_dim: 3 }", Shape{3});
  const std::vector<Tensor> params = UniformParams(*layer, device, 1);
  LayerContext ctx{.device = device, .micro_batch = 2, .sample_offset = 8};
  struct Case {
    std::vector<int64_t> ids;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{7, 1, 2, 3, 4, 0}, "sample 8 (row 0 of micro-batch 2), position 0 has token id 7"},
      {{0, 1, 2, 5, 4, 9}, "sample 9 (row 1 of micro-batch 2), position 0 has token id 5"},
      {{0, 1, 2, 3, 4, -1}, "sample 9 (row 1 of micro-batch 2), position 2 has token id -1"},
      {{0, -3, 2, 3, 4, 0}, "sample 8 (row 0 of micro-batch 2), position 1 has token id -3"},
  };
  for (const Case& c : cases) {
    const Tensor ids = I64Tensor(device, Shape{2, 3}, c.ids);
    const absl::Status checked = layer->CheckHostInput(ctx, ids);
    EXPECT_EQ(checked.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(checked.message()),
                AllOf(HasSubstr(c.says), HasSubstr("outside [0, 5)"), HasSubstr("'wte'"),
                      HasSubstr("embedding.num_embeddings")));
    SavedTensors saved;
    const absl::StatusOr<Tensor> y = layer->Forward(ctx, params, ids, saved);
    ASSERT_FALSE(y.ok());
    EXPECT_EQ(checked, y.status()) << "the host check and Forward word it the same";
  }
  EXPECT_TRUE(layer->CheckHostInput(ctx, I64Tensor(device, Shape{2, 3}, {0, 4, 4, 4, 3, 0})).ok());
  EXPECT_EQ(layer->CheckHostInput(ctx, I64Tensor(device, Shape{2, 2}, {0, 1, 2, 3})).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EmbeddingTest, RejectsFloatInputAndAGradientOfTheWrongShape) {
  CpuDevice device;
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'wte' embedding { num_embeddings: 5 embedding_dim: 3 }", Shape{3});
  const std::vector<Tensor> params = UniformParams(*layer, device, 1);
  LayerContext ctx{.device = device};
  SavedTensors saved;
  EXPECT_EQ(layer->Forward(ctx, params, UniformTensor(device, Shape{2, 3}, 2, 0, 4), saved)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(layer->Forward(ctx, params, I64Tensor(device, Shape{1, 3}, {0, 1, 2}), saved).ok());
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  EXPECT_EQ(
      layer->Backward(ctx, params, grads, saved, UniformTensor(device, Shape{1, 3, 4}, 3, -1, 1))
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(EmbeddingTest, TakesIdsAndHasANormalTableOfTheConfiguredStd) {
  std::unique_ptr<Layer> layer = MakeLayer(
      "name: 'wte' embedding { num_embeddings: 256 embedding_dim: 16 init_std: 0.02 }", Shape{64});
  EXPECT_EQ(layer->input_dtype(), DType::kI64);
  EXPECT_EQ(layer->output_shape(), (Shape{64, 16}));
  const std::vector<ParamSpec> specs = layer->parameter_specs();
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].name, "weight");
  EXPECT_EQ(specs[0].shape, (Shape{256, 16}));
  EXPECT_EQ(specs[0].init, ParamInit::kNormal);
  EXPECT_DOUBLE_EQ(specs[0].bound, 0.02);
  // PyTorch's default std is 1.
  EXPECT_DOUBLE_EQ(
      MakeLayer("name: 'wte' embedding { num_embeddings: 4 embedding_dim: 2 }", Shape{3})
          ->parameter_specs()[0]
          .bound,
      1.0);
  // A gather: one operation per output element.
  EXPECT_DOUBLE_EQ(layer->ForwardFlopsPerSample(), 64.0 * 16);
}

TEST(EmbeddingTest, RejectsBadConfigurationNamingTheField) {
  const struct {
    std::string text;
    Shape input;
    std::string field;
  } cases[] = {
      {"name: 'e' embedding { embedding_dim: 3 }", Shape{4}, "embedding.num_embeddings"},
      {"name: 'e' embedding { num_embeddings: 0 embedding_dim: 3 }", Shape{4},
       "embedding.num_embeddings"},
      {"name: 'e' embedding { num_embeddings: 5 }", Shape{4}, "embedding.embedding_dim"},
      {"name: 'e' embedding { num_embeddings: 5 embedding_dim: -2 }", Shape{4},
       "embedding.embedding_dim"},
      {"name: 'e' embedding { num_embeddings: 5 embedding_dim: 3 init_std: -1 }", Shape{4},
       "embedding.init_std"},
      {"name: 'e' embedding { num_embeddings: 5 embedding_dim: 3 init_std: nan }", Shape{4},
       "embedding.init_std"},
      {"name: 'e' embedding { num_embeddings: 5 embedding_dim: 3 }", Shape{4, 2}, "[T]"},
      {"name: 'e' embedding { num_embeddings: 5 embedding_dim: 3 }", Shape{0}, "[T]"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text + " on " + c.input.ToString());
    const absl::Status status = CreateStatus(c.text, c.input);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.field));
  }
}

// ---- positional_embedding -------------------------------------------------------------------

TEST(PositionalEmbeddingTest, ForwardAndBackwardMatchIndependentValues) {
  CpuDevice device;
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'wpe' positional_embedding { max_positions: 4 }", Shape{3, 2});
  const std::vector<Tensor> params = {PatternTensor(device, Shape{4, 2}, 4, 0.1)};
  const Tensor x = PatternTensor(device, Shape{2, 3, 2}, 3, 0.1);
  LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(Values(*y), Pointwise(FloatNear(1e-6), {0.5f, 0.2f, -0.1f, 1.3f, -0.7f, 0.7f, -0.4f,
                                                      -0.7f, 0.7f, 0.4f, 0.1f, -0.2f}));
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  const Tensor dy = PatternTensor(device, Shape{2, 3, 2}, 5, 0.1);
  absl::StatusOr<Tensor> dx = layer->Backward(ctx, params, grads, saved, dy);
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_THAT(Values(*dx), Pointwise(FloatNear(1e-6), {0.7f, -0.3f, 0.4f, -0.6f, 0.1f, 0.8f, -0.2f,
                                                       0.5f, -0.5f, 0.2f, -0.8f, -0.1f}));
  EXPECT_FALSE(dx->SharesStorageWith(dy));
  // Rows T.. of the table (here row 3) get no gradient.
  EXPECT_THAT(Values(grads[0]),
              Pointwise(FloatNear(1e-6), {0.5f, 0.2f, -0.1f, -0.4f, -0.7f, 0.7f, 0.0f, 0.0f}));
}

TEST(PositionalEmbeddingTest, GradientsMatchCentralDifferences) {
  CpuDevice device;
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'wpe' positional_embedding { max_positions: 6 }", Shape{4, 3});
  const std::vector<Tensor> params = UniformParams(*layer, device, 8);
  const Tensor x = UniformTensor(device, Shape{2, 4, 3}, 9, -1.0f, 1.0f);
  LayerContext ctx{.device = device};
  absl::StatusOr<GradientCheckReport> report = CheckLayerGradients(*layer, ctx, params, x);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->checked, 2 * 4 * 3 + 6 * 3);
  EXPECT_TRUE(report->ok()) << report->ToString();

  LayerContext without_dx{.device = device, .need_input_grad = false};
  SavedTensors saved;
  ASSERT_TRUE(layer->Forward(without_dx, params, x, saved).ok());
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  absl::StatusOr<Tensor> dx = layer->Backward(without_dx, params, grads, saved,
                                              UniformTensor(device, Shape{2, 4, 3}, 10, -1, 1));
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_FALSE(dx->defined());
}

TEST(PositionalEmbeddingTest, RejectsASequenceLongerThanTheTableSayingWhatToSet) {
  const absl::Status status =
      CreateStatus("name: 'wpe' positional_embedding { max_positions: 4 }", Shape{5, 8});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("positional_embedding.max_positions is 4"),
                    HasSubstr("sequence length T is 5"), HasSubstr("set max_positions >= 5")));
}

TEST(PositionalEmbeddingTest, RejectsBadConfigurationNamingTheField) {
  const struct {
    std::string text;
    Shape input;
    std::string field;
  } cases[] = {
      {"name: 'p' positional_embedding {}", Shape{3, 2}, "positional_embedding.max_positions"},
      {"name: 'p' positional_embedding { max_positions: 0 }", Shape{3, 2},
       "positional_embedding.max_positions"},
      {"name: 'p' positional_embedding { max_positions: 4 init_std: -0.1 }", Shape{3, 2},
       "positional_embedding.init_std"},
      {"name: 'p' positional_embedding { max_positions: 4 }", Shape{3}, "[T, D]"},
      {"name: 'p' positional_embedding { max_positions: 4 }", Shape{2, 3, 2}, "[T, D]"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text + " on " + c.input.ToString());
    const absl::Status status = CreateStatus(c.text, c.input);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.field));
  }
}

TEST(PositionalEmbeddingTest, HasANormalTableOfMaxPositionsRows) {
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'wpe' positional_embedding { max_positions: 128 }", Shape{64, 16});
  EXPECT_EQ(layer->input_dtype(), DType::kF32);
  EXPECT_EQ(layer->output_shape(), (Shape{64, 16}));
  const std::vector<ParamSpec> specs = layer->parameter_specs();
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].name, "weight");
  EXPECT_EQ(specs[0].shape, (Shape{128, 16}));
  EXPECT_EQ(specs[0].init, ParamInit::kNormal);
  EXPECT_DOUBLE_EQ(specs[0].bound, 0.02);  // GPT-2's default
  EXPECT_TRUE(layer->SavedPerSample().empty());
  EXPECT_DOUBLE_EQ(layer->ForwardFlopsPerSample(), 64.0 * 16);
}

}  // namespace
}  // namespace gpipe::testing
