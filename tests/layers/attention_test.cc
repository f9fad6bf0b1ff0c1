// causal_self_attention against independently computed values
// (tests/layers/oracles/attention_oracles.py), its causality, finite differences, its numerical
// stability, and its parameters, FLOPs, saved bytes and configuration rules.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/causality.h"
#include "tests/layers/gradient_check.h"
#include "tests/layers/make_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

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

constexpr char kTwoHeads[] = "name: 'attn' causal_self_attention { num_heads: 2 }";

TEST(CausalSelfAttentionTest, ForwardAndBackwardMatchIndependentValues) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(kTwoHeads, Shape{3, 4});
  const std::vector<Tensor> params = {
      PatternTensor(device, Shape{12, 4}, 7, 0.05), PatternTensor(device, Shape{12}, 8, 0.05),
      PatternTensor(device, Shape{4, 4}, 9, 0.05), PatternTensor(device, Shape{4}, 10, 0.05)};
  const Tensor x = PatternTensor(device, Shape{2, 3, 4}, 6, 0.1);
  LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 3, 4}));
  EXPECT_THAT(Values(*y),
              Pointwise(FloatNear(1e-6),
                        {0.24925f,      -0.1635f,      -0.03225f,     -0.21975f,    0.384325452f,
                         -0.376581229f, 0.120232777f,  -0.415423905f, 0.478854913f, -0.370383283f,
                         0.114245606f,  -0.397801438f, 0.243f,        -0.145f,      -0.0485f,
                         -0.21125f,     0.377694667f,  -0.359938285f, 0.105022514f, -0.407360437f,
                         0.471993332f,  -0.352837245f, 0.0982129241f, -0.38934049f}));

  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  absl::StatusOr<Tensor> dx =
      layer->Backward(ctx, params, grads, saved, PatternTensor(device, Shape{2, 3, 4}, 11, 0.1));
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_THAT(
      Values(*dx),
      Pointwise(FloatNear(1e-6),
                {0.190171615f,   0.0392787741f,   -0.233112447f,  0.18894071f,    -0.0579725674f,
                 0.0185244615f,  0.0115127727f,   0.00467160644f, -0.0545564675f, 0.0030102309f,
                 0.0392671685f,  -0.0485239356f,  0.121705412f,   0.0315352082f,  -0.155292308f,
                 0.0510955809f,  -0.153853878f,   0.0609431003f,  0.0901612507f,  -0.15738298f,
                 -0.0521842251f, -0.00395390182f, 0.0418848722f,  -0.0458516886f}));
  EXPECT_THAT(
      Values(grads[0]),
      Pointwise(
          FloatNear(1e-6),
          {-0.00542395745f, 0.00953302015f,  -0.0127303579f,  0.00431790997f,  0.0075046338f,
           -0.012779116f,   0.0197827383f,   -0.00886617216f, -0.00135782588f, -0.00577035775f,
           -0.0130704916f,  0.0142590618f,   0.001655586f,    -0.00394632008f, 0.00261938715f,
           0.000370518088f, -0.00459357155f, -0.0123581973f,  0.0203421228f,   -0.00459357155f,
           -0.0156673168f,  0.00912332915f,  0.00785278537f,  -0.0156673169f,  0.00728401064f,
           -0.00255178093f, -0.00567867572f, 0.00728401064f,  -0.0227349125f,  0.0229598275f,
           -0.00026989827f, -0.0227349125f,  -0.200802777f,   0.0698556665f,   0.301536532f,
           -0.292802777f,   0.719720885f,    -0.136895412f,   -0.660590567f,   0.613720885f,
           -0.14415356f,    0.115753159f,    0.186580482f,    -0.23015356f,    -0.0344717045f,
           -0.174707478f,   0.104115019f,    0.171528295f}));
  // The key bias shifts every score of a row equally, so softmax cancels it: zero gradient.
  EXPECT_THAT(
      Values(grads[1]),
      Pointwise(FloatNear(1e-6), {0.0243546685f, -0.040927015f, 0.039042219f, -0.00321267027f, 0.0f,
                                  0.0f, 0.0f, 0.0f, -0.23f, -0.265f, -0.215f, 0.515f}));
  EXPECT_THAT(
      Values(grads[2]),
      Pointwise(FloatNear(1e-6), {-0.095655464f, 0.525606701f, -0.308542182f, 0.119923479f,
                                  0.0650944846f, -0.225513179f, 0.129492014f, 0.0658679745f,
                                  -0.277717541f, 0.603459129f, -0.401061419f, -0.436124162f,
                                  0.0110939722f, -0.402696536f, 0.469316802f, -0.0396796663f}));
  EXPECT_THAT(Values(grads[3]), Pointwise(FloatNear(1e-6), {0.9f, 0.0f, -0.9f, -0.1f}));
}

TEST(CausalSelfAttentionTest, OutputsBeforeAPositionIgnoreInputsAtAndAfterIt) {
  ExpectCausal(*MakeLayer(kTwoHeads, Shape{5, 8}), 3);
}

TEST(CausalSelfAttentionTest, SoftmaxStaysFiniteAndExactWithHugeScores) {
  CpuDevice device;
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'attn' causal_self_attention { num_heads: 1 bias: false }", Shape{3, 2});
  // Identity projections: q = k = v = x, y = O. Scores of 1e4 * 1e4 overflow a naive exp.
  const std::vector<Tensor> params = {
      F32Tensor(device, Shape{6, 2}, {1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1}),
      F32Tensor(device, Shape{2, 2}, {1, 0, 0, 1})};
  const Tensor x = F32Tensor(device, Shape{1, 3, 2}, {1e4f, 0.0f, 0.0f, 1e4f, 0.0f, 1e4f});
  LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  // Position 1: scores {0, 1e8/sqrt(2)}, so it outputs itself. Position 2: scores
  // {0, 1e8/sqrt(2), 1e8/sqrt(2)}, so it averages positions 1 and 2 (both (0, 1e4)).
  EXPECT_THAT(Values(*y), Pointwise(FloatNear(0.0f), {1e4f, 0.0f, 0.0f, 1e4f, 0.0f, 1e4f}));
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  absl::StatusOr<Tensor> dx =
      layer->Backward(ctx, params, grads, saved, UniformTensor(device, Shape{1, 3, 2}, 5, -1, 1));
  ASSERT_TRUE(dx.ok()) << dx.status();
  for (float v : Values(*dx)) EXPECT_TRUE(std::isfinite(v));
}

struct GradientCase {
  std::string name;
  std::string spec;
  Shape input;
};

class CausalSelfAttentionGradientTest : public ::testing::TestWithParam<GradientCase> {};

TEST_P(CausalSelfAttentionGradientTest, AnalyticGradientsMatchCentralDifferences) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(GetParam().spec, GetParam().input);
  const std::vector<Tensor> params = UniformParams(*layer, device, 11, -0.5f, 0.5f);
  const Tensor x = UniformTensor(device, GetParam().input.WithBatch(2), 12, -1.0f, 1.0f);
  int64_t param_elements = 0;
  for (const Tensor& p : params) param_elements += p.num_elements();
  for (bool need_input_grad : {true, false}) {
    SCOPED_TRACE(need_input_grad);
    LayerContext ctx{.device = device, .need_input_grad = need_input_grad};
    absl::StatusOr<GradientCheckReport> report = CheckLayerGradients(*layer, ctx, params, x);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->checked, param_elements + (need_input_grad ? x.num_elements() : 0));
    EXPECT_TRUE(report->ok()) << report->ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Configurations, CausalSelfAttentionGradientTest,
    ::testing::Values(GradientCase{"ThreeHeadsWithBias",
                                   "name: 'a' causal_self_attention { num_heads: 3 }", Shape{4, 6}},
                      GradientCase{"OneHeadWithoutBias",
                                   "name: 'a' causal_self_attention { num_heads: 1 bias: false }",
                                   Shape{3, 4}},
                      // T past the CPU kernel's 64-position query and key tiles.
                      GradientCase{"LongerThanATile",
                                   "name: 'a' causal_self_attention { num_heads: 2 bias: false }",
                                   Shape{70, 4}}),
    [](const ::testing::TestParamInfo<GradientCase>& info) { return info.param.name; });

TEST(CausalSelfAttentionTest, WithoutInputGradientReturnsAnUndefinedTensorAndTheSameGrads) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(kTwoHeads, Shape{4, 8});
  const std::vector<Tensor> params = UniformParams(*layer, device, 3);
  const Tensor x = UniformTensor(device, Shape{2, 4, 8}, 4, -1.0f, 1.0f);
  const Tensor dy = UniformTensor(device, Shape{2, 4, 8}, 5, -1.0f, 1.0f);
  std::vector<std::vector<Tensor>> grads;
  for (bool need_input_grad : {true, false}) {
    LayerContext ctx{.device = device, .need_input_grad = need_input_grad};
    SavedTensors saved;
    ASSERT_TRUE(layer->Forward(ctx, params, x, saved).ok());
    grads.push_back(ZeroGrads(*layer, device));
    absl::StatusOr<Tensor> dx = layer->Backward(ctx, params, grads.back(), saved, dy);
    ASSERT_TRUE(dx.ok()) << dx.status();
    EXPECT_EQ(dx->defined(), need_input_grad);
  }
  for (size_t p = 0; p < grads[0].size(); ++p) {
    EXPECT_EQ(Values(grads[0][p]), Values(grads[1][p]));
  }
}

// The CPU's fused attention shares (sample, head) pairs among threads and keeps each pair's
// sums on one thread: one or three threads give the same bits.
TEST(CausalSelfAttentionTest, FusedAttentionGivesTheSameBitsOnOneOrThreeThreads) {
  const FusedAttentionArgs args{.batch = 2, .t = 70, .heads = 3, .head_dim = 4, .scale = 0.5f};
  std::vector<std::vector<float>> results;
  for (int threads : {1, 3, 1}) {
    CpuDevice device({.threads = threads});
    const Tensor qkv = UniformTensor(device, Shape{2, 70, 36}, 21, -2.0f, 2.0f);
    const Tensor dout = UniformTensor(device, Shape{2, 70, 12}, 22, -1.0f, 1.0f);
    Tensor out = UniformTensor(device, Shape{2, 70, 12}, 23, -1.0f, 1.0f);
    Tensor lse = UniformTensor(device, Shape{2, 3, 70}, 24, -1.0f, 1.0f);
    Tensor dqkv = UniformTensor(device, Shape{2, 70, 36}, 25, -1.0f, 1.0f);
    ASSERT_TRUE(device.ops().attention.FusedCausalForward(args, qkv, out, lse).ok());
    ASSERT_TRUE(device.ops().attention.FusedCausalBackward(args, qkv, out, lse, dout, dqkv).ok());
    std::vector<float> all = Values(out);
    for (const Tensor* t : {&lse, &dqkv}) {
      const std::vector<float> values = Values(*t);
      all.insert(all.end(), values.begin(), values.end());
    }
    results.push_back(std::move(all));
  }
  EXPECT_EQ(results[1], results[0]);
  EXPECT_EQ(results[2], results[0]);
}

TEST(CausalSelfAttentionTest, ParametersFollowGpt2LayoutAndLinearInit) {
  std::unique_ptr<Layer> layer = MakeLayer(kTwoHeads, Shape{5, 16});
  EXPECT_EQ(layer->output_shape(), (Shape{5, 16}));
  const std::vector<ParamSpec> specs = layer->parameter_specs();
  ASSERT_EQ(specs.size(), 4u);
  const std::vector<std::pair<std::string, Shape>> expected = {{"qkv.weight", Shape{48, 16}},
                                                               {"qkv.bias", Shape{48}},
                                                               {"proj.weight", Shape{16, 16}},
                                                               {"proj.bias", Shape{16}}};
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(specs[i].name, expected[i].first);
    EXPECT_EQ(specs[i].shape, expected[i].second);
    EXPECT_EQ(specs[i].init, ParamInit::kUniform);
    EXPECT_DOUBLE_EQ(specs[i].bound, 0.25);  // 1/sqrt(D)
  }
  const std::vector<ParamSpec> without_bias =
      MakeLayer("name: 'a' causal_self_attention { num_heads: 4 bias: false }", Shape{5, 16})
          ->parameter_specs();
  ASSERT_EQ(without_bias.size(), 2u);
  EXPECT_EQ(without_bias[0].name, "qkv.weight");
  EXPECT_EQ(without_bias[1].name, "proj.weight");
}

TEST(CausalSelfAttentionTest, FlopsCountTheFourProductsOverTheFullScoreMatrix) {
  std::unique_ptr<Layer> layer = MakeLayer(kTwoHeads, Shape{5, 8});
  // qkv 2*T*D*3D, scores 2*T*T*D, P v 2*T*T*D, projection 2*T*D*D.
  EXPECT_DOUBLE_EQ(layer->ForwardFlopsPerSample(),
                   2.0 * 5 * 8 * 24 + 2.0 * 5 * 5 * 8 + 2.0 * 5 * 5 * 8 + 2.0 * 5 * 8 * 8);
}

TEST(CausalSelfAttentionTest, SavesInputQkvLogSumExpAndHeadOutputs) {
  const std::vector<SavedSpec> specs = MakeLayer(kTwoHeads, Shape{5, 8})->SavedPerSample();
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[0].ref, SavedRef::kInput);
  EXPECT_EQ(specs[1].ref, SavedRef::kNew);
  EXPECT_EQ(specs[1].BytesPerSample(4), 3 * 5 * 8 * 4);
  // One f32 log-sum-exp per head and position, not the heads' [T, T] probabilities.
  EXPECT_EQ(specs[2].ref, SavedRef::kNew);
  EXPECT_EQ(specs[2].BytesPerSample(4), 2 * 5 * 4);
  EXPECT_EQ(specs[3].ref, SavedRef::kNew);
  EXPECT_EQ(specs[3].BytesPerSample(4), 5 * 8 * 4);
  for (const SavedSpec& spec : specs) EXPECT_EQ(spec.bytes_per_call, 0);
  // Under bf16 storage qkv and O take 2 bytes a value; the log-sum-exp stays f32.
  EXPECT_EQ(specs[1].BytesPerSample(2), 3 * 5 * 8 * 2);
  EXPECT_EQ(specs[2].BytesPerSample(2), 2 * 5 * 4);
  EXPECT_EQ(specs[3].BytesPerSample(2), 5 * 8 * 2);
}

// Saved bytes per sample at T = 64, 128 and 256: no T * T term, so the steps are equal.
TEST(CausalSelfAttentionTest, SavedBytesGrowLinearlyInPositions) {
  std::vector<int64_t> totals;
  for (int64_t t : {64, 128, 256}) {
    int64_t total = 0;
    for (const SavedSpec& spec :
         MakeLayer("name: 'a' causal_self_attention { num_heads: 4 }", Shape{t, 32})
             ->SavedPerSample()) {
      total += spec.BytesPerSample(4);
    }
    totals.push_back(total);
  }
  // qkv 3*T*D, log-sum-exp H*T and O T*D floats per sample: (4 D + H) * 4 bytes per position.
  EXPECT_EQ(totals[0], 64 * (4 * 32 + 4) * 4);
  EXPECT_EQ(totals[1] - totals[0], totals[0]);
  EXPECT_EQ(totals[2] - totals[1], 2 * totals[0]);
}

TEST(CausalSelfAttentionTest, RejectsBadConfigurationNamingTheField) {
  const struct {
    std::string text;
    Shape input;
    std::string field;
  } cases[] = {
      {"name: 'a' causal_self_attention {}", Shape{3, 8}, "causal_self_attention.num_heads"},
      {"name: 'a' causal_self_attention { num_heads: 0 }", Shape{3, 8},
       "causal_self_attention.num_heads"},
      {"name: 'a' causal_self_attention { num_heads: -2 }", Shape{3, 8},
       "causal_self_attention.num_heads"},
      {"name: 'a' causal_self_attention { num_heads: 3 }", Shape{3, 8},
       "causal_self_attention.num_heads (3) must divide the input width D = 8"},
      {"name: 'a' causal_self_attention { num_heads: 2 }", Shape{8}, "[T, D]"},
      {"name: 'a' causal_self_attention { num_heads: 2 }", Shape{2, 3, 8}, "[T, D]"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text + " on " + c.input.ToString());
    const absl::Status status =
        LayerRegistry::WithBuiltins().Create(ParseLayer(c.text), c.input).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.field));
  }
}

TEST(CausalSelfAttentionTest, RejectsInputAndGradientOfTheWrongShape) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(kTwoHeads, Shape{3, 4});
  const std::vector<Tensor> params = UniformParams(*layer, device, 3);
  LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> bad =
      layer->Forward(ctx, params, UniformTensor(device, Shape{2, 4, 4}, 4, -1, 1), saved);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'attn'"));
  ASSERT_TRUE(
      layer->Forward(ctx, params, UniformTensor(device, Shape{2, 3, 4}, 4, -1, 1), saved).ok());
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  EXPECT_EQ(
      layer->Backward(ctx, params, grads, saved, UniformTensor(device, Shape{1, 3, 4}, 5, -1, 1))
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpipe::testing
