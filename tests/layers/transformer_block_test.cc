// transformer_block: GPT-2's pre-LayerNorm block, h = x + attn(ln_1(x)), y = h + mlp(ln_2(h)).
// Its parameters (names, shapes, order), its output against the layers composed by hand with
// the same parameter tensors, finite differences, causality, saved tensors and configuration
// rules.
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

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kBlock[] = "name: 'h0' transformer_block { num_heads: 2 }";

TEST(TransformerBlockTest, ParametersFollowGpt2NamesShapesAndOrder) {
  std::unique_ptr<Layer> layer = MakeLayer(kBlock, Shape{5, 8});
  EXPECT_EQ(layer->type(), "transformer_block");
  EXPECT_EQ(layer->name(), "h0");
  EXPECT_EQ(layer->output_shape(), (Shape{5, 8}));
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  std::vector<ParamInit> inits;
  for (const ParamSpec& p : layer->parameter_specs()) {
    names.push_back(p.name);
    shapes.push_back(p.shape);
    inits.push_back(p.init);
  }
  EXPECT_THAT(names,
              ElementsAre("ln_1.weight", "ln_1.bias", "attn.qkv.weight", "attn.qkv.bias",
                          "attn.proj.weight", "attn.proj.bias", "ln_2.weight", "ln_2.bias",
                          "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias"));
  EXPECT_THAT(shapes,
              ElementsAre(Shape{8}, Shape{8}, Shape{24, 8}, Shape{24}, Shape{8, 8}, Shape{8},
                          Shape{8}, Shape{8}, Shape{32, 8}, Shape{32}, Shape{8, 32}, Shape{8}));
  // Layer norms start at ones and zeros; the rest as torch.nn.Linear.
  EXPECT_THAT(inits, ElementsAre(ParamInit::kOnes, ParamInit::kZeros, ParamInit::kUniform,
                                 ParamInit::kUniform, ParamInit::kUniform, ParamInit::kUniform,
                                 ParamInit::kOnes, ParamInit::kZeros, ParamInit::kUniform,
                                 ParamInit::kUniform, ParamInit::kUniform, ParamInit::kUniform));
  EXPECT_TRUE(layer->buffer_specs().empty());
  EXPECT_FALSE(layer->SplitsBackward());

  // mlp_ratio sets the hidden width.
  std::vector<Shape> narrow;
  for (const ParamSpec& p :
       MakeLayer("name: 'h0' transformer_block { num_heads: 4 mlp_ratio: 2 }", Shape{3, 8})
           ->parameter_specs()) {
    narrow.push_back(p.shape);
  }
  ASSERT_EQ(narrow.size(), 12u);
  EXPECT_EQ(narrow[8], (Shape{16, 8}));
  EXPECT_EQ(narrow[10], (Shape{8, 16}));
}

// The block by hand: each layer built on its own and given its slice of the block's parameters.
struct ByHand {
  ByHand(int64_t t, int64_t d, int64_t heads, double eps) {
    const Shape sample{t, d};
    const std::string norm = "layer_norm { eps: " + std::to_string(eps) + " }";
    ln_1 = MakeLayer("name: 'ln_1' " + norm, sample);
    attn = MakeLayer(
        "name: 'attn' causal_self_attention { num_heads: " + std::to_string(heads) + " }", sample);
    ln_2 = MakeLayer("name: 'ln_2' " + norm, sample);
    fc = MakeLayer("name: 'fc' linear { out_features: " + std::to_string(4 * d) + " }", sample);
    gelu = MakeLayer("name: 'gelu' gelu {}", Shape{t, 4 * d});
    proj = MakeLayer("name: 'proj' linear { out_features: " + std::to_string(d) + " }",
                     Shape{t, 4 * d});
  }

  std::vector<float> Forward(Device& device, const std::vector<Tensor>& params, const Tensor& x) {
    const LayerContext ctx{.device = device};
    std::span<const Tensor> p = params;
    const Tensor a = Run(*attn, ctx, p.subspan(2, 4), Run(*ln_1, ctx, p.subspan(0, 2), x));
    const Tensor h = Add(device, x, a);
    Tensor m = Run(*ln_2, ctx, p.subspan(6, 2), h);
    m = Run(*fc, ctx, p.subspan(8, 2), m);
    m = Run(*gelu, ctx, {}, m);
    m = Run(*proj, ctx, p.subspan(10, 2), m);
    return Values(Add(device, h, m));
  }

  static Tensor Run(const Layer& layer, const LayerContext& ctx, std::span<const Tensor> params,
                    const Tensor& x) {
    SavedTensors saved;
    absl::StatusOr<Tensor> y = layer.Forward(ctx, params, x, saved);
    EXPECT_TRUE(y.ok()) << layer.name() << ": " << y.status();
    return y.ok() ? *y : Tensor();
  }

  static Tensor Add(Device& device, const Tensor& a, const Tensor& b) {
    std::vector<float> sum = Values(a);
    const std::vector<float> other = Values(b);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += other[i];
    return F32Tensor(device, a.shape(), sum);
  }

  double Flops() const {
    return ln_1->ForwardFlopsPerSample() + attn->ForwardFlopsPerSample() +
           ln_2->ForwardFlopsPerSample() + fc->ForwardFlopsPerSample() +
           gelu->ForwardFlopsPerSample() + proj->ForwardFlopsPerSample();
  }

  std::unique_ptr<Layer> ln_1, attn, ln_2, fc, gelu, proj;
};

TEST(TransformerBlockTest, ForwardEqualsTheLayersComposedByHand) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(kBlock, Shape{5, 8});
  const std::vector<Tensor> params = UniformParams(*layer, device, 3, -0.5f, 0.5f);
  const Tensor x = UniformTensor(device, Shape{3, 5, 8}, 4, -1.0f, 1.0f);
  ByHand by_hand(5, 8, 2, 1e-5);
  const std::vector<float> expected = by_hand.Forward(device, params, x);
  for (bool training : {true, false}) {
    SCOPED_TRACE(training);
    const LayerContext ctx{.device = device, .training = training};
    SavedTensors saved;
    absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(y->shape(), x.shape());
    EXPECT_EQ(Values(*y), expected);
    EXPECT_EQ(saved.tensors.size(), training ? layer->SavedPerSample().size() : 0u);
  }
  // Two residual sums of T * D on top of the layers'.
  EXPECT_DOUBLE_EQ(layer->ForwardFlopsPerSample(), by_hand.Flops() + 2.0 * 5 * 8);
}

TEST(TransformerBlockTest, UsesTheEpsFromThePlanInBothLayerNorms) {
  CpuDevice device;
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'h0' transformer_block { num_heads: 1 eps: 0.5 }", Shape{3, 4});
  const std::vector<Tensor> params = UniformParams(*layer, device, 5, -0.5f, 0.5f);
  const Tensor x = UniformTensor(device, Shape{2, 3, 4}, 6, -1.0f, 1.0f);
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward({.device = device}, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  ByHand with_eps(3, 4, 1, 0.5);
  EXPECT_EQ(Values(*y), with_eps.Forward(device, params, x));
  ByHand without(3, 4, 1, 1e-5);
  EXPECT_NE(Values(*y), without.Forward(device, params, x));
}

TEST(TransformerBlockTest, AnalyticGradientsMatchCentralDifferences) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(kBlock, Shape{3, 4});
  const std::vector<Tensor> params = UniformParams(*layer, device, 11, -0.5f, 0.5f);
  const Tensor x = UniformTensor(device, Shape{2, 3, 4}, 12, -1.0f, 1.0f);
  int64_t param_elements = 0;
  for (const Tensor& p : params) param_elements += p.num_elements();
  for (bool need_input_grad : {true, false}) {
    SCOPED_TRACE(need_input_grad);
    const LayerContext ctx{.device = device, .need_input_grad = need_input_grad};
    absl::StatusOr<GradientCheckReport> report = CheckLayerGradients(*layer, ctx, params, x);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->checked, param_elements + (need_input_grad ? x.num_elements() : 0));
    EXPECT_TRUE(report->ok()) << report->ToString();
  }
}

TEST(TransformerBlockTest, OutputsBeforeAPositionIgnoreInputsAtAndAfterIt) {
  ExpectCausal(*MakeLayer(kBlock, Shape{4, 8}), 3);
}

// What the block keeps per micro-batch, derived from its layers' own specs with each tensor
// kept once: x (kInput), ln_1's statistics and output, attention's qkv, P and O, then h (the
// first residual's output, ln_2's input: new storage), ln_2's statistics and output, fc's
// output (gelu's input) and gelu's output (proj's input). y and the MLP's output are not kept.
TEST(TransformerBlockTest, SavesEachInnerTensorOnce) {
  constexpr int64_t kT = 3, kD = 8, kH = 2, f32 = 4;
  const std::vector<SavedSpec> specs = MakeLayer(kBlock, Shape{kT, kD})->SavedPerSample();
  const std::vector<int64_t> per_sample = {0,
                                           kT * 3 * f32,
                                           kT * kD * f32,
                                           3 * kT * kD * f32,
                                           kH * kT * f32,  // attention's log-sum-exp
                                           kT * kD * f32,
                                           kT * kD * f32,
                                           kT * 3 * f32,
                                           kT * kD * f32,
                                           kT * 4 * kD * f32,
                                           kT * 4 * kD * f32};
  ASSERT_EQ(specs.size(), per_sample.size());
  EXPECT_EQ(specs[0].ref, SavedRef::kInput);
  for (size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE(i);
    if (i > 0) {
      EXPECT_EQ(specs[i].ref, SavedRef::kNew);
    }
    EXPECT_EQ(specs[i].BytesPerSample(4), per_sample[i]);
    EXPECT_EQ(specs[i].bytes_per_call, 0);
  }
}

TEST(TransformerBlockTest, RejectsBadConfigurationNamingTheField) {
  const struct {
    std::string text;
    Shape input;
    std::string message;
  } cases[] = {
      {"name: 'h0' transformer_block {}", Shape{3, 8}, "transformer_block.num_heads must be set"},
      {"name: 'h0' transformer_block { num_heads: 0 }", Shape{3, 8}, "transformer_block.num_heads"},
      {"name: 'h0' transformer_block { num_heads: 3 }", Shape{3, 8},
       "transformer_block.num_heads must be set, >= 1 and divide d_model 8, got 3"},
      {"name: 'h0' transformer_block { num_heads: 2 mlp_ratio: 0 }", Shape{3, 8},
       "transformer_block.mlp_ratio must be >= 1, got 0"},
      {"name: 'h0' transformer_block { num_heads: 2 mlp_ratio: -4 }", Shape{3, 8},
       "transformer_block.mlp_ratio"},
      {"name: 'h0' transformer_block { num_heads: 2 eps: 0 }", Shape{3, 8},
       "transformer_block.eps must be a finite number > 0"},
      {"name: 'h0' transformer_block { num_heads: 2 eps: -1 }", Shape{3, 8},
       "transformer_block.eps"},
      {"name: 'h0' transformer_block { num_heads: 2 eps: nan }", Shape{3, 8},
       "transformer_block.eps"},
      {"name: 'h0' transformer_block { num_heads: 2 }", Shape{8},
       "transformer_block needs a per-sample input [seq_len, d_model], got [8]"},
      {"name: 'h0' transformer_block { num_heads: 2 }", Shape{2, 3, 8},
       "transformer_block needs a per-sample input [seq_len, d_model]"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text + " on " + c.input.ToString());
    const absl::Status status =
        LayerRegistry::WithBuiltins().Create(ParseLayer(c.text), c.input).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
  }
}

TEST(TransformerBlockTest, RejectsInputAndGradientOfTheWrongShapeNamingTheBlock) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(kBlock, Shape{3, 4});
  const std::vector<Tensor> params = UniformParams(*layer, device, 3);
  const LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> bad =
      layer->Forward(ctx, params, UniformTensor(device, Shape{2, 4, 4}, 4, -1, 1), saved);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("transformer_block 'h0'"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("[3, 4]"));
  ASSERT_TRUE(
      layer->Forward(ctx, params, UniformTensor(device, Shape{2, 3, 4}, 4, -1, 1), saved).ok());
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  const absl::Status status =
      layer->Backward(ctx, params, grads, saved, UniformTensor(device, Shape{2, 3, 5}, 5, -1, 1))
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("transformer_block 'h0'"));
}

}  // namespace
}  // namespace gpipe::testing
