// residual: y = x + f(x) with f built from the plan's inner layers through the registry. Its
// output against f run by hand from the same layers and parameters, its parameter and buffer
// names and order, finite differences, the saved tensors LayerSequence keeps once per distinct
// tensor, the inner layers' own random streams, and the configuration rules.
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/gradient_check.h"
#include "tests/layers/make_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kMlp[] =
    "name: 'block' residual {"
    "  layers { name: 'fc1' linear { out_features: 6 } }"
    "  layers { name: 'act' relu {} }"
    "  layers { name: 'fc2' linear { out_features: 6 } }"
    "}";
// The inner layers of kMlp, one plan entry each, on [6].
const std::vector<std::string>& MlpLayers() {
  static const auto* layers =
      new std::vector<std::string>{"name: 'fc1' linear { out_features: 6 }", "name: 'act' relu {}",
                                   "name: 'fc2' linear { out_features: 6 }"};
  return *layers;
}

constexpr char kConv[] =
    "name: 'block' residual {"
    "  layers { name: 'conv1' conv2d { out_channels: 2 kernel_size: 3 padding: 1 } }"
    "  layers { name: 'bn1' batch_norm2d {} }"
    "  layers { name: 'act' relu {} }"
    "  layers { name: 'conv2' conv2d { out_channels: 2 kernel_size: 3 padding: 1 } }"
    "  layers { name: 'bn2' batch_norm2d {} }"
    "}";
const std::vector<std::string>& ConvLayers() {
  static const auto* layers = new std::vector<std::string>{
      "name: 'conv1' conv2d { out_channels: 2 kernel_size: 3 padding: 1 }",
      "name: 'bn1' batch_norm2d {}", "name: 'act' relu {}",
      "name: 'conv2' conv2d { out_channels: 2 kernel_size: 3 padding: 1 }",
      "name: 'bn2' batch_norm2d {}"};
  return *layers;
}
const Shape kConvSample{2, 4, 4};

// Buffers as `layer`'s buffer_specs() initialize them (zeros or ones).
std::vector<Tensor> InitialBuffers(const Layer& layer, Device& device) {
  std::vector<Tensor> buffers;
  for (const ParamSpec& spec : layer.buffer_specs()) {
    const float value = spec.init == ParamInit::kOnes ? 1.0f : 0.0f;
    buffers.push_back(F32Tensor(device, spec.shape,
                                std::vector<float>(spec.shape.num_elements(), value),
                                MemoryKind::kParameter));
  }
  return buffers;
}

bool BitIdentical(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.bytes()) == 0;
}

// f(x) by hand: each inner layer built on its own and run in turn on its slice of `params`, with
// buffers of its own (updated as the residual's would be).
struct ByHand {
  ByHand(const std::vector<std::string>& specs, const Shape& sample, Device& device) {
    Shape current = sample;
    for (const std::string& spec : specs) {
      layers.push_back(MakeLayer(spec, current));
      current = layers.back()->output_shape();
      buffers.push_back(InitialBuffers(*layers.back(), device));
    }
  }

  Tensor F(const LayerContext& ctx, const std::vector<Tensor>& params, const Tensor& x) {
    std::span<const Tensor> rest = params;
    Tensor current = x;
    for (size_t i = 0; i < layers.size(); ++i) {
      const size_t count = layers[i]->parameter_specs().size();
      LayerContext inner = ctx;
      inner.buffers = buffers[i];
      SavedTensors saved;
      absl::StatusOr<Tensor> y = layers[i]->Forward(inner, rest.first(count), current, saved);
      EXPECT_TRUE(y.ok()) << y.status();
      if (!y.ok()) return Tensor();
      current = *std::move(y);
      rest = rest.subspan(count);
    }
    EXPECT_TRUE(rest.empty());
    return current;
  }

  std::vector<std::unique_ptr<Layer>> layers;
  std::vector<std::vector<Tensor>> buffers;
};

TEST(ResidualTest, MlpOutputIsInputPlusInnerLayersRunByHand) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(kMlp, Shape{6});
  EXPECT_EQ(layer->type(), "residual");
  EXPECT_EQ(layer->name(), "block");
  EXPECT_EQ(layer->output_shape(), (Shape{6}));
  const std::vector<Tensor> params = UniformParams(*layer, device, 3);
  const Tensor x = UniformTensor(device, Shape{5, 6}, 4, -1.0f, 1.0f);
  for (bool training : {true, false}) {
    SCOPED_TRACE(training);
    const LayerContext ctx{.device = device, .training = training};
    SavedTensors saved;
    absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
    ASSERT_TRUE(y.ok()) << y.status();
    ByHand by_hand(MlpLayers(), Shape{6}, device);
    const std::vector<float> f = Values(by_hand.F(ctx, params, x));
    std::vector<float> expected = Values(x);
    for (size_t i = 0; i < expected.size(); ++i) expected[i] += f[i];
    EXPECT_EQ(Values(*y), expected);
    EXPECT_EQ(saved.tensors.size(), training ? 2u : 0u);
  }
}

TEST(ResidualTest, ConvBatchNormOutputAndBuffersMatchInnerLayersRunByHand) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(kConv, kConvSample);
  const std::vector<Tensor> params = UniformParams(*layer, device, 5, -0.5f, 0.5f);
  std::vector<Tensor> buffers = InitialBuffers(*layer, device);
  ASSERT_EQ(buffers.size(), 4u);
  ByHand by_hand(ConvLayers(), kConvSample, device);
  // Two training calls (running statistics move), then evaluation (they are used).
  for (const auto& [training, seed] :
       {std::pair{true, 6}, std::pair{true, 7}, std::pair{false, 8}}) {
    SCOPED_TRACE(seed);
    const Tensor x = UniformTensor(device, kConvSample.WithBatch(3), seed, -1.0f, 1.0f);
    const LayerContext ctx{.device = device, .training = training, .buffers = buffers};
    SavedTensors saved;
    absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
    ASSERT_TRUE(y.ok()) << y.status();
    const LayerContext hand_ctx{.device = device, .training = training};
    const std::vector<float> f = Values(by_hand.F(hand_ctx, params, x));
    std::vector<float> expected = Values(x);
    for (size_t i = 0; i < expected.size(); ++i) expected[i] += f[i];
    EXPECT_EQ(Values(*y), expected);
    // The residual's buffers are bn1's then bn2's, updated exactly as the layers' own.
    EXPECT_TRUE(BitIdentical(buffers[0], by_hand.buffers[1][0]));
    EXPECT_TRUE(BitIdentical(buffers[1], by_hand.buffers[1][1]));
    EXPECT_TRUE(BitIdentical(buffers[2], by_hand.buffers[4][0]));
    EXPECT_TRUE(BitIdentical(buffers[3], by_hand.buffers[4][1]));
  }
  EXPECT_NE(Values(buffers[0]), std::vector<float>(2, 0.0f)) << "running_mean never moved";
}

TEST(ResidualTest, ParametersAndBuffersAreTheInnerLayersInOrderWithTheirNames) {
  std::unique_ptr<Layer> mlp = MakeLayer(kMlp, Shape{6});
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const ParamSpec& p : mlp->parameter_specs()) {
    names.push_back(p.name);
    shapes.push_back(p.shape);
    EXPECT_EQ(p.init, ParamInit::kUniform) << p.name;  // linear's own initialization
  }
  EXPECT_THAT(names, ElementsAre("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"));
  EXPECT_THAT(shapes, ElementsAre(Shape{6, 6}, Shape{6}, Shape{6, 6}, Shape{6}));
  EXPECT_TRUE(mlp->buffer_specs().empty());

  std::unique_ptr<Layer> conv = MakeLayer(kConv, kConvSample);
  names.clear();
  shapes.clear();
  for (const ParamSpec& p : conv->parameter_specs()) {
    names.push_back(p.name);
    shapes.push_back(p.shape);
  }
  EXPECT_THAT(names, ElementsAre("conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias",
                                 "conv2.weight", "conv2.bias", "bn2.weight", "bn2.bias"));
  EXPECT_THAT(shapes, ElementsAre(Shape{2, 2, 3, 3}, Shape{2}, Shape{2}, Shape{2},
                                  Shape{2, 2, 3, 3}, Shape{2}, Shape{2}, Shape{2}));
  const std::vector<ParamSpec> buffers = conv->buffer_specs();
  ASSERT_EQ(buffers.size(), 4u);
  const char* buffer_names[] = {"bn1.running_mean", "bn1.running_var", "bn2.running_mean",
                                "bn2.running_var"};
  for (size_t i = 0; i < buffers.size(); ++i) {
    EXPECT_EQ(buffers[i].name, buffer_names[i]);
    EXPECT_EQ(buffers[i].shape, (Shape{2}));
    EXPECT_EQ(buffers[i].init, i % 2 == 0 ? ParamInit::kZeros : ParamInit::kOnes);
  }
  // FLOPs: f's plus the sum.
  double inner = 0.0;
  for (const std::string& spec : MlpLayers())
    inner += MakeLayer(spec, Shape{6})->ForwardFlopsPerSample();
  EXPECT_DOUBLE_EQ(mlp->ForwardFlopsPerSample(), inner + 6.0);
  EXPECT_FALSE(mlp->SplitsBackward());
}

struct GradientCase {
  std::string name;
  std::string spec;
  Shape sample;
  int64_t batch;
};

void PrintTo(const GradientCase& c, std::ostream* os) { *os << c.name; }

class ResidualGradientTest : public ::testing::TestWithParam<GradientCase> {};

TEST_P(ResidualGradientTest, AnalyticGradientsMatchCentralDifferences) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(GetParam().spec, GetParam().sample);
  const std::vector<Tensor> params = UniformParams(*layer, device, 31, -0.5f, 0.5f);
  std::vector<Tensor> buffers = InitialBuffers(*layer, device);
  const Tensor x =
      UniformTensor(device, GetParam().sample.WithBatch(GetParam().batch), 32, -1.0f, 1.0f);
  int64_t param_elements = 0;
  for (const Tensor& p : params) param_elements += p.num_elements();
  // relu's kink: a step must not carry a pre-activation across 0. Seeds are chosen so that
  // none is within the step of it (seeds 21/22 put one of bn1's channel-0 outputs there).
  for (bool need_input_grad : {true, false}) {
    SCOPED_TRACE(need_input_grad);
    const LayerContext ctx{.device = device,
                           .need_input_grad = need_input_grad,
                           .buffers = buffers,
                           .update_buffers = false};
    absl::StatusOr<GradientCheckReport> report =
        CheckLayerGradients(*layer, ctx, params, x, {.step = 1e-3, .tolerance = 5e-3});
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->checked, param_elements + (need_input_grad ? x.num_elements() : 0));
    EXPECT_TRUE(report->ok()) << report->ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Bodies, ResidualGradientTest,
    ::testing::Values(GradientCase{"LinearReluLinear", kMlp, Shape{6}, 3},
                      GradientCase{"ConvBatchNormReluConvBatchNorm", kConv, kConvSample, 2}),
    [](const ::testing::TestParamInfo<GradientCase>& info) { return info.param.name; });

TEST(ResidualTest, WithoutInputGradientReturnsAnUndefinedTensorAndTheSameGrads) {
  for (const auto& [spec, sample] : {std::pair<std::string, Shape>{kMlp, Shape{6}},
                                     std::pair<std::string, Shape>{kConv, kConvSample}}) {
    SCOPED_TRACE(spec);
    CpuDevice device;
    std::unique_ptr<Layer> layer = MakeLayer(spec, sample);
    const std::vector<Tensor> params = UniformParams(*layer, device, 3, -0.5f, 0.5f);
    std::vector<Tensor> buffers = InitialBuffers(*layer, device);
    const Tensor x = UniformTensor(device, sample.WithBatch(3), 4, -1.0f, 1.0f);
    const Tensor dy = UniformTensor(device, sample.WithBatch(3), 5, -1.0f, 1.0f);
    std::vector<std::vector<Tensor>> grads;
    std::vector<Tensor> dxs;
    for (bool need_input_grad : {true, false}) {
      const LayerContext ctx{.device = device,
                             .need_input_grad = need_input_grad,
                             .buffers = buffers,
                             .update_buffers = false};
      SavedTensors saved;
      ASSERT_TRUE(layer->Forward(ctx, params, x, saved).ok());
      grads.push_back(ZeroGrads(*layer, device));
      absl::StatusOr<Tensor> dx = layer->Backward(ctx, params, grads.back(), saved, dy);
      ASSERT_TRUE(dx.ok()) << dx.status();
      EXPECT_EQ(dx->defined(), need_input_grad);
      dxs.push_back(*dx);
    }
    for (size_t p = 0; p < grads[0].size(); ++p) {
      EXPECT_TRUE(BitIdentical(grads[0][p], grads[1][p])) << p;
    }
    // The skip connection's share: dx is dy plus f's input gradient, never dy itself.
    EXPECT_FALSE(dxs[0].SharesStorageWith(dy));
  }
}

// The skip adds dy to f's input gradient even when f's gradient is dy itself (dropout with p = 0
// passes it through): dy must come back doubled and untouched.
TEST(ResidualTest, IdentityBodyDoublesTheGradientWithoutWritingIntoDy) {
  CpuDevice device;
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'r' residual { layers { name: 'd' dropout { p: 0 } } }", Shape{4});
  const LayerContext ctx{.device = device};
  const Tensor x = UniformTensor(device, Shape{2, 4}, 4, -1.0f, 1.0f);
  const Tensor dy = UniformTensor(device, Shape{2, 4}, 5, -1.0f, 1.0f);
  const std::vector<float> dy_before = Values(dy);
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, {}, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  std::vector<float> doubled = Values(x);
  for (float& v : doubled) v *= 2.0f;
  EXPECT_EQ(Values(*y), doubled);
  absl::StatusOr<Tensor> dx = layer->Backward(ctx, {}, {}, saved, dy);
  ASSERT_TRUE(dx.ok()) << dx.status();
  doubled = dy_before;
  for (float& v : doubled) v *= 2.0f;
  EXPECT_EQ(Values(*dx), doubled);
  EXPECT_EQ(Values(dy), dy_before);
}

// LayerSequence keeps one tensor per distinct saved tensor and describes each against the
// residual's own input and new storage. [fc1, act, fc2]: fc1 saves its input (x: kInput), relu
// its output, which is fc2's input: one kNew slot of relu's output, however many layers read it.
TEST(ResidualTest, SavedSpecsKeepEachInnerTensorOnce) {
  CpuDevice device;
  std::unique_ptr<Layer> mlp = MakeLayer(
      "name: 'block' residual {"
      "  layers { name: 'fc1' linear { out_features: 8 } }"
      "  layers { name: 'act' relu {} }"
      "  layers { name: 'fc2' linear { out_features: 8 } }"
      "}",
      Shape{3, 8});
  const std::vector<SavedSpec> specs = mlp->SavedPerSample();
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].ref, SavedRef::kInput);
  EXPECT_EQ(specs[1].ref, SavedRef::kNew);
  EXPECT_EQ(specs[1].BytesPerSample(4), 3 * 8 * 4);
  EXPECT_EQ(specs[1].bytes_per_call, 0);
  // And Forward keeps exactly those: x itself and relu's output.
  const std::vector<Tensor> params = UniformParams(*mlp, device, 3);
  const Tensor x = UniformTensor(device, Shape{2, 3, 8}, 4, -1.0f, 1.0f);
  const LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> y = mlp->Forward(ctx, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(saved.tensors.size(), 2u);
  EXPECT_TRUE(saved.tensors[0].SharesStorageWith(x));
  SavedTensors unused;
  absl::StatusOr<Tensor> fc1 = MakeLayer("name: 'fc1' linear { out_features: 8 }", Shape{3, 8})
                                   ->Forward(ctx, std::span(params).first(2), x, unused);
  ASSERT_TRUE(fc1.ok());
  std::vector<float> relu = Values(*fc1);
  for (float& v : relu) v = v > 0.0f ? v : 0.0f;
  EXPECT_EQ(Values(saved.tensors[1]), relu);

  // A last layer saving its output: that is f(x), not y = x + f(x), so it is new storage.
  const std::vector<SavedSpec> ends_in_relu =
      MakeLayer(
          "name: 'r' residual { layers { name: 'fc' linear { out_features: 8 } }"
          " layers { name: 'act' relu {} } }",
          Shape{3, 8})
          ->SavedPerSample();
  ASSERT_EQ(ends_in_relu.size(), 2u);
  EXPECT_EQ(ends_in_relu[0].ref, SavedRef::kInput);
  EXPECT_EQ(ends_in_relu[1].ref, SavedRef::kNew);
  EXPECT_EQ(ends_in_relu[1].BytesPerSample(4), 3 * 8 * 4);

  // [conv1, bn1, act, conv2, bn2] on [2, 4, 4]: x (conv1); conv1's output (bn1's input); bn1's
  // statistics (per call); relu's output (act's own, conv2's input); conv2's output (bn2's
  // input); bn2's statistics. bn2's output is never saved.
  const std::vector<SavedSpec> conv = MakeLayer(kConv, kConvSample)->SavedPerSample();
  ASSERT_EQ(conv.size(), 6u);
  const SavedRef refs[] = {SavedRef::kInput, SavedRef::kNew, SavedRef::kNew,
                           SavedRef::kNew,   SavedRef::kNew, SavedRef::kNew};
  const int64_t per_sample[] = {0, 2 * 4 * 4 * 4, 0, 2 * 4 * 4 * 4, 2 * 4 * 4 * 4, 0};
  const int64_t per_call[] = {0, 0, 3 * 2 * 4, 0, 0, 3 * 2 * 4};
  for (size_t i = 0; i < conv.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(conv[i].ref, refs[i]);
    EXPECT_EQ(conv[i].BytesPerSample(4), per_sample[i]);
    EXPECT_EQ(conv[i].bytes_per_call, per_call[i]);
  }
}

// Each inner layer gets its own random stream: two dropouts in one residual draw different
// masks, and the same context draws the same ones again.
TEST(ResidualTest, InnerDropoutsDrawDifferentMasksReproducibly) {
  CpuDevice device;
  std::unique_ptr<Layer> one =
      MakeLayer("name: 'r' residual { layers { name: 'd1' dropout { p: 0.5 } } }", Shape{64});
  std::unique_ptr<Layer> two = MakeLayer(
      "name: 'r' residual { layers { name: 'd1' dropout { p: 0.5 } }"
      " layers { name: 'd2' dropout { p: 0.5 } } }",
      Shape{64});
  const Tensor x = F32Tensor(device, Shape{1, 64}, std::vector<float>(64, 1.0f));
  const LayerContext ctx{.device = device, .seed = 17, .step = 3, .layer_index = 2};
  SavedTensors saved;
  // f = d1(x) alone: 2 where d1 keeps, 0 where it drops.
  absl::StatusOr<Tensor> y1 = one->Forward(ctx, {}, x, saved);
  // f = d2(d1(x)): 4 where both keep. d1 is the first layer in both, so draws the same mask.
  absl::StatusOr<Tensor> y2 = two->Forward(ctx, {}, x, saved);
  ASSERT_TRUE(y1.ok() && y2.ok());
  const std::vector<float> first = Values(*y1);
  const std::vector<float> both = Values(*y2);
  int kept_by_d1 = 0, dropped_by_d2 = 0;
  for (int i = 0; i < 64; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(first[i] == 1.0f || first[i] == 3.0f) << first[i];
    if (first[i] == 1.0f) {
      EXPECT_EQ(both[i], 1.0f);  // d1 dropped it
      continue;
    }
    ++kept_by_d1;
    ASSERT_TRUE(both[i] == 1.0f || both[i] == 5.0f) << both[i];
    if (both[i] == 1.0f) ++dropped_by_d2;
  }
  // With d2 drawing d1's mask again it would drop none of what d1 kept.
  EXPECT_GT(kept_by_d1, 16);
  EXPECT_GT(dropped_by_d2, 4);
  EXPECT_LT(dropped_by_d2, kept_by_d1 - 4);

  // The same context again: the same masks, bit for bit, and Backward uses them.
  SavedTensors again_saved;
  absl::StatusOr<Tensor> again = two->Forward(ctx, {}, x, again_saved);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Values(*again), both);
  const Tensor dy = UniformTensor(device, Shape{1, 64}, 9, -1.0f, 1.0f);
  absl::StatusOr<Tensor> dx = two->Backward(ctx, {}, {}, again_saved, dy);
  ASSERT_TRUE(dx.ok()) << dx.status();
  const std::vector<float> g = Values(dy);
  for (int i = 0; i < 64; ++i) {
    // y = x + 4 m1 m2 x, so dx = dy + 4 m1 m2 dy, with 4 m1 m2 = both - 1.
    EXPECT_EQ(Values(*dx)[i], g[i] + (both[i] - 1.0f) * g[i]) << i;
  }
  // Another seed, other masks.
  LayerContext other = ctx;
  other.seed = 18;
  absl::StatusOr<Tensor> different = two->Forward(other, {}, x, saved);
  ASSERT_TRUE(different.ok());
  EXPECT_NE(Values(*different), both);
}

TEST(ResidualTest, MissingBuffersNameTheInnerLayer) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(kConv, kConvSample);
  const std::vector<Tensor> params = UniformParams(*layer, device, 3);
  const LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> y =
      layer->Forward(ctx, params, UniformTensor(device, kConvSample.WithBatch(2), 4, -1, 1), saved);
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(y.status().message()), HasSubstr("'bn1'"));
  EXPECT_THAT(std::string(y.status().message()), HasSubstr("running_mean and running_var"));
}

TEST(ResidualTest, RejectsBadConfigurationNamingTheInnerLayer) {
  const struct {
    std::string text;
    std::string message;
  } cases[] = {
      {"name: 'r' residual {}", "residual.layers is empty"},
      {"name: 'r' residual { layers { relu {} } }", "residual.layers[0] has no name"},
      {"name: 'r' residual { layers { name: 'a' relu {} } layers { name: 'a' tanh {} } }",
       "residual.layers[1] 'a': the name is used twice"},
      {"name: 'r' residual { layers { name: 'fc' linear { out_features: 7 } } }",
       "residual layers turn [6] into [7]"},
      {"name: 'r' residual { layers { name: 'act' relu {} }"
       " layers { name: 'fc' linear { out_features: 0 } } }",
       "residual.layers[1] 'fc' (linear, input [6]): linear.out_features must be set and >= 1"},
      {"name: 'r' residual { layers { name: 'bn' batch_norm2d {} } }",
       "residual.layers[0] 'bn' (batch_norm2d, input [6])"},
      {"name: 'r' residual { layers { name: 'x' } }", "residual.layers[0] 'x'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    const absl::Status status =
        LayerRegistry::WithBuiltins().Create(ParseLayer(c.text), Shape{6}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
  }
}

// A residual inside a residual: names nest, and y = x + (h + g(h)) with h = x.
TEST(ResidualTest, NestedResidualNamesItsParametersByPath) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(
      "name: 'outer' residual { layers { name: 'inner' residual {"
      " layers { name: 'fc' linear { out_features: 4 } } } } }",
      Shape{4});
  std::vector<std::string> names;
  for (const ParamSpec& p : layer->parameter_specs()) names.push_back(p.name);
  EXPECT_THAT(names, ElementsAre("inner.fc.weight", "inner.fc.bias"));
  const std::vector<Tensor> params = UniformParams(*layer, device, 3);
  const Tensor x = UniformTensor(device, Shape{2, 4}, 4, -1.0f, 1.0f);
  absl::StatusOr<GradientCheckReport> report =
      CheckLayerGradients(*layer, {.device = device}, params, x);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->ToString();
}

}  // namespace
}  // namespace gpipe::testing
