// Conv2d against independently computed values (tests/layers/oracles/conv_pool_oracles.py),
// finite-difference gradients, the zero-bubble split, memory discipline, configuration errors
// and FLOPs.
#include <cmath>
#include <cstring>
#include <memory>
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

using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

// ((i * mul) % mod - offset) * scale: the oracle script's pattern(), exact in float.
std::vector<float> Pattern(int64_t n, int64_t mul, int64_t mod, int64_t offset, float scale) {
  std::vector<float> values;
  for (int64_t i = 0; i < n; ++i)
    values.push_back(static_cast<float>((i * mul) % mod - offset) * scale);
  return values;
}

// The grouped, strided, padded, dilated configuration the gradient checks and split tests use.
constexpr char kGroupedSpec[] =
    "name: 'conv' conv2d { out_channels: 4 kernel_size: 3 stride: 2 padding: 1 dilation: 2 "
    "groups: 2 }";
constexpr char kGroupedWithoutBiasSpec[] =
    "name: 'conv' conv2d { out_channels: 4 kernel_size: 3 stride: 2 padding: 1 dilation: 2 "
    "groups: 2 bias: false }";
const Shape kGroupedInput{4, 7, 6};

TEST(Conv2dTest, ForwardAndBackwardMatchIndependentValues) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(
      "name: 'conv' conv2d { out_channels: 3 kernel_size: [3, 2] stride: [2, 1] padding: [1, 0] }",
      Shape{2, 4, 5});
  EXPECT_EQ(layer->output_shape(), (Shape{3, 2, 4}));
  const std::vector<Tensor> params = {
      F32Tensor(device, Shape{3, 2, 3, 2}, Pattern(36, 5, 13, 6, 0.125f)),
      F32Tensor(device, Shape{3}, {0.5f, -0.25f, 0.125f})};
  const Tensor x = F32Tensor(device, Shape{1, 2, 4, 5}, Pattern(40, 7, 11, 5, 0.25f));
  const LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{1, 3, 2, 4}));
  EXPECT_THAT(Values(*y),
              Pointwise(FloatNear(1e-5f),
                        std::vector<float>{0.5,     1.71875,  -1.1875,  1.75,     0.53125, -0.59375,
                                           2.40625, -0.78125, 1.25,     -0.84375, 0.15625, 0.8125,
                                           -1.1875, 1.875,    -0.90625, 0.09375,  -0.9375, -0.25,
                                           1.8125,  -2.65625, 2.6875,   -1.84375, 0.15625, 2.5}));

  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  const Tensor dy = F32Tensor(device, Shape{1, 3, 2, 4}, Pattern(24, 3, 7, 3, 0.5f));
  absl::StatusOr<Tensor> dx = layer->Backward(ctx, params, grads, saved, dy);
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_THAT(Values(*dx),
              Pointwise(FloatNear(1e-5f),
                        std::vector<float>{-1.875, 0.75,    0.875,  -0.75, 0.875,   -0.625, -0.6875,
                                           0,      1.125,   0.8125, 0.25,  -0.5,    1.375,  -2.875,
                                           0.5625, 0.875,   -0.75,  0.875, 0.75,    -1.875, 0.5625,
                                           1.25,   -2.5,    1.625,  -1,    -2.8125, 2.3125, -1.625,
                                           0.5625, 1.375,   -1.125, 2,     -1.75,   1.5,    0.5625,
                                           0.3125, -0.6875, 1,      -3,    0.5625}));
  EXPECT_THAT(Values(grads[0]),
              Pointwise(FloatNear(1e-5f),
                        std::vector<float>{
                            -0.25, -0.625, 2.5,    -2.875, 3.125, -3.625, -0.875, 1.5,    -3.25,
                            1,     -4,     0.25,   1.25,   0.5,   1.125,  1.125,  -1.625, 2.5,
                            0,     -2.125, 2.5,    -1.625, 2.5,   -1.625, -3.375, 1.625,  -2.875,
                            2.5,   0.625,  -3.625, 1.75,   1.25,  -4,     2.75,   -3.25,  3.5}));
  EXPECT_THAT(Values(grads[1]), Pointwise(FloatNear(1e-5f), std::vector<float>{-1.5f, 0.0f, 1.5f}));
}

TEST(Conv2dTest, GroupedDilatedBatchMatchesIndependentValues) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(
      "name: 'conv' conv2d { out_channels: 2 kernel_size: 2 stride: [1, 2] padding: 1 "
      "dilation: 2 groups: 2 bias: false }",
      Shape{4, 4, 3});
  EXPECT_EQ(layer->output_shape(), (Shape{2, 4, 2}));
  const std::vector<Tensor> params = {
      F32Tensor(device, Shape{2, 2, 2, 2}, Pattern(16, 3, 7, 3, 0.25f))};
  const Tensor x = F32Tensor(device, Shape{2, 4, 4, 3}, Pattern(96, 5, 17, 8, 0.25f));
  const LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(
      Values(*y),
      Pointwise(FloatNear(1e-5f),
                std::vector<float>{-0.4375, -0.6875, -0.6875, 0.125,   -1,      2.9375,  -0.25,
                                   1.5625,  -0.5,    -0.6875, -0.6875, -1.0625, -1.4375, -0.3125,
                                   -0.9375, -0.375,  -0.9375, -0.1875, -1.4375, 0.5,     -0.6875,
                                   0.125,   -0.5,    1.4375,  -0.25,   -1.1875, -1,      0.3125,
                                   -0.6875, -1.0625, -0.4375, -0.625}));

  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  const Tensor dy = F32Tensor(device, Shape{2, 2, 4, 2}, Pattern(32, 5, 9, 4, 0.5f));
  absl::StatusOr<Tensor> dx = layer->Backward(ctx, params, grads, saved, dy);
  ASSERT_TRUE(dx.ok()) << dx.status();
  // Only the middle column of each input plane is ever read (taps at -1, 1 and 3 of width 3).
  const std::vector<float> middle_column = {
      -0.75, -0.25, -0.375, 1.375,  1.25, 2.875,  2.625, 1.125,  0.375, 1.25, 1.75,
      0.75,  0.875, 2.25,   1.75,   0.75, -0.375, -1.25, -0.25,  1.125, 1.25, -0.25,
      2.875, 1.375, 0,      -0.375, 1.25, 0.625,  1,     -0.625, 2.25,  1.125};
  std::vector<float> expected_dx(96, 0.0f);
  for (size_t row = 0; row < middle_column.size(); ++row)
    expected_dx[3 * row + 1] = middle_column[row];
  EXPECT_THAT(Values(*dx), Pointwise(FloatNear(1e-5f), expected_dx));
  EXPECT_THAT(Values(grads[0]),
              Pointwise(FloatNear(1e-5f),
                        std::vector<float>{-8.875, 6.125, -1.75, 6.75, 8, -10.75, 2, -2.5, 4.25,
                                           -4.75, 9.5, -3.25, -4.125, 5.375, -4, 0.125}));
}

TEST(Conv2dTest, GradientsMatchFiniteDifferences) {
  struct Case {
    std::string spec;
    Shape input;
  };
  const std::vector<Case> cases = {
      {kGroupedSpec, kGroupedInput},
      {kGroupedWithoutBiasSpec, kGroupedInput},
      {"name: 'conv' conv2d { out_channels: 2 kernel_size: [2, 3] stride: [1, 2] padding: [0, 2] "
       "}",
       Shape{3, 5, 4}},
      {"name: 'conv' conv2d { out_channels: 3 kernel_size: 3 padding: 1 dilation: [1, 2] }",
       Shape{2, 5, 6}},
      // 1x1 kernel, stride 1, no padding: the path without im2col.
      {"name: 'conv' conv2d { out_channels: 3 kernel_size: 1 }", Shape{2, 3, 4}},
      {"name: 'conv' conv2d { out_channels: 2 kernel_size: 1 groups: 2 }", Shape{4, 3, 2}},
      // Padding wider than the output: most taps fall outside the input.
      {"name: 'conv' conv2d { out_channels: 2 kernel_size: 5 padding: 2 }", Shape{1, 1, 1}},
      {"name: 'conv' conv2d { out_channels: 2 kernel_size: 7 padding: 3 }", Shape{2, 2, 2}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec);
    CpuDevice device;
    std::unique_ptr<Layer> layer = MakeLayer(c.spec, c.input);
    const std::vector<Tensor> params = UniformParams(*layer, device, 5);
    const Tensor x = UniformTensor(device, c.input.WithBatch(2), 6, -1.0f, 1.0f);
    const LayerContext ctx{.device = device};
    absl::StatusOr<GradientCheckReport> report = CheckLayerGradients(*layer, ctx, params, x);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_TRUE(report->ok()) << report->ToString();
  }
}

// A 5x5 "same" convolution of a 1x1 map sees only its centre tap: y = w[2][2] x + b.
TEST(Conv2dTest, PaddingWiderThanTheMapKeepsOnlyTheTapsInside) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(
      "name: 'conv' conv2d { out_channels: 1 kernel_size: 5 padding: 2 }", Shape{1, 1, 1});
  ASSERT_EQ(layer->output_shape(), (Shape{1, 1, 1}));
  std::vector<float> weight(25);
  for (int i = 0; i < 25; ++i) weight[i] = static_cast<float>(i + 1);  // centre tap: 13
  const std::vector<Tensor> params = {F32Tensor(device, Shape{1, 1, 5, 5}, weight),
                                      F32Tensor(device, Shape{1}, {0.5f})};
  const Tensor x = F32Tensor(device, Shape{2, 1, 1, 1}, {2.0f, -1.0f});
  SavedTensors saved;
  const LayerContext ctx{.device = device};
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values(*y), (std::vector<float>{26.5f, -12.5f}));
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  absl::StatusOr<Tensor> dx = layer->Backward(ctx, params, grads, saved,
                                              F32Tensor(device, Shape{2, 1, 1, 1}, {1.0f, 3.0f}));
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_EQ(Values(*dx), (std::vector<float>{13.0f, 39.0f}));
  std::vector<float> dweight(25, 0.0f);
  dweight[12] = 2.0f * 1.0f + (-1.0f) * 3.0f;
  EXPECT_EQ(Values(grads[0]), dweight);
  EXPECT_EQ(Values(grads[1]), (std::vector<float>{4.0f}));
}

// Same shape, dtype and bytes.
void ExpectBitIdentical(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what;
  ASSERT_TRUE(expected.defined()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  EXPECT_EQ(std::memcmp(actual.raw_data(), expected.raw_data(), actual.bytes()), 0)
      << what << " differs from the combined Backward's";
}

std::vector<Tensor> StartingGrads(const Layer& layer, Device& device, uint64_t seed) {
  std::vector<Tensor> grads;
  for (const ParamSpec& spec : layer.parameter_specs()) {
    grads.push_back(UniformTensor(device, spec.shape, seed + grads.size() * 31, -0.5f, 0.5f, 0.0f,
                                  MemoryKind::kGradient));
  }
  return grads;
}

std::vector<Tensor> Copies(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> copies;
  for (const Tensor& t : tensors) copies.push_back(*t.Clone(MemoryKind::kGradient));
  return copies;
}

TEST(Conv2dTest, SplitHalvesInEitherOrderAreBitIdenticalToBackward) {
  for (const char* spec : {kGroupedSpec, kGroupedWithoutBiasSpec}) {
    SCOPED_TRACE(spec);
    CpuDevice device;
    std::unique_ptr<Layer> layer = MakeLayer(spec, kGroupedInput);
    ASSERT_TRUE(layer->SplitsBackward());
    const std::vector<Tensor> params = UniformParams(*layer, device, 11);
    const Tensor x = UniformTensor(device, kGroupedInput.WithBatch(3), 12, -2.0f, 2.0f);
    const LayerContext ctx{.device = device};
    SavedTensors saved;
    absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
    ASSERT_TRUE(y.ok()) << y.status();
    const Tensor dy = UniformTensor(device, y->shape(), 13, -1.0f, 1.0f);
    const std::vector<Tensor> start = StartingGrads(*layer, device, 14);

    std::vector<Tensor> combined = Copies(start);
    absl::StatusOr<Tensor> dx = layer->Backward(ctx, params, combined, saved, dy);
    ASSERT_TRUE(dx.ok()) << dx.status();
    for (bool weight_first : {false, true}) {
      SCOPED_TRACE(weight_first ? "W then B" : "B then W");
      std::vector<Tensor> split = Copies(start);
      if (weight_first) {
        ASSERT_TRUE(layer->split_backward()->BackwardWeight(ctx, split, saved, dy).ok());
      }
      absl::StatusOr<Tensor> split_dx = layer->split_backward()->BackwardInput(ctx, params, saved, dy);
      ASSERT_TRUE(split_dx.ok()) << split_dx.status();
      if (!weight_first) {
        ASSERT_TRUE(layer->split_backward()->BackwardWeight(ctx, split, saved, dy).ok());
      }
      ExpectBitIdentical(*split_dx, *dx, "dx");
      for (size_t p = 0; p < split.size(); ++p) {
        ExpectBitIdentical(split[p], combined[p], "param " + std::to_string(p));
      }
    }
  }
}

TEST(Conv2dTest, WithoutInputGradientReturnsUndefinedAndStillAddsParamGrads) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(kGroupedSpec, kGroupedInput);
  const std::vector<Tensor> params = UniformParams(*layer, device, 21);
  const Tensor x = UniformTensor(device, kGroupedInput.WithBatch(2), 22, -1.0f, 1.0f);
  const LayerContext ctx{.device = device, .need_input_grad = false};
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  const Tensor dy = UniformTensor(device, y->shape(), 23, -1.0f, 1.0f);
  std::vector<Tensor> once = ZeroGrads(*layer, device);
  std::vector<Tensor> twice = ZeroGrads(*layer, device);
  absl::StatusOr<Tensor> dx = layer->Backward(ctx, params, once, saved, dy);
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_FALSE(dx->defined());
  absl::StatusOr<Tensor> split_dx = layer->split_backward()->BackwardInput(ctx, params, saved, dy);
  ASSERT_TRUE(split_dx.ok()) << split_dx.status();
  EXPECT_FALSE(split_dx->defined());
  ASSERT_TRUE(layer->Backward(ctx, params, twice, saved, dy).ok());
  ASSERT_TRUE(layer->Backward(ctx, params, twice, saved, dy).ok());
  for (size_t p = 0; p < once.size(); ++p) {
    std::vector<float> doubled = Values(once[p]);
    for (float& v : doubled) v *= 2.0f;
    EXPECT_THAT(Values(twice[p]), Pointwise(FloatNear(1e-5f), doubled));
    EXPECT_NE(Values(once[p]), std::vector<float>(doubled.size(), 0.0f));
  }
}

TEST(Conv2dTest, WorkspaceIsCountedDuringEachCallAndFreedBeforeItReturns) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(kGroupedSpec, kGroupedInput);
  const std::vector<Tensor> params = UniformParams(*layer, device, 31);
  const Tensor x = UniformTensor(device, kGroupedInput.WithBatch(2), 32, -1.0f, 1.0f);
  const LayerContext ctx{.device = device};
  const int64_t activations_before = device.memory().current(MemoryKind::kActivation);
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  // The convolution's scratch (oneDNN's scratchpad, layout buffers) is device workspace: counted
  // while the op runs, freed before it returns.
  EXPECT_GT(device.memory().peak(MemoryKind::kWorkspace), 0);
  EXPECT_EQ(device.memory().current(MemoryKind::kWorkspace), 0);
  EXPECT_EQ(device.memory().current(MemoryKind::kActivation) - activations_before, y->bytes());
  device.memory().ResetPeaks();
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  absl::StatusOr<Tensor> dx = layer->Backward(ctx, params, grads, saved, *y);
  ASSERT_TRUE(dx.ok()) << dx.status();
  // The weight gradient is formed in workspace before it is added to the accumulated one.
  EXPECT_GE(device.memory().peak(MemoryKind::kWorkspace), grads[0].bytes());
  EXPECT_EQ(device.memory().current(MemoryKind::kWorkspace), 0);
  ASSERT_EQ(saved.tensors.size(), 1u);
  EXPECT_TRUE(saved.tensors[0].SharesStorageWith(x));
}

TEST(Conv2dTest, ParametersFollowPytorchLayoutInitAndFlops) {
  std::unique_ptr<Layer> layer = MakeLayer(kGroupedSpec, kGroupedInput);
  // H_out = (7 + 2 - 4 - 1) / 2 + 1 = 3, W_out = (6 + 2 - 4 - 1) / 2 + 1 = 2.
  EXPECT_EQ(layer->output_shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(layer->type(), "conv2d");
  const std::vector<ParamSpec> specs = layer->parameter_specs();
  ASSERT_EQ(specs.size(), 2u);
  const double bound = 1.0 / std::sqrt(2.0 * 3 * 3);  // fan_in = in/groups * kh * kw
  EXPECT_EQ(specs[0].name, "weight");
  EXPECT_EQ(specs[0].shape, (Shape{4, 2, 3, 3}));
  EXPECT_EQ(specs[0].init, ParamInit::kUniform);
  EXPECT_DOUBLE_EQ(specs[0].bound, bound);
  EXPECT_EQ(specs[1].name, "bias");
  EXPECT_EQ(specs[1].shape, (Shape{4}));
  EXPECT_EQ(specs[1].init, ParamInit::kUniform);
  EXPECT_DOUBLE_EQ(specs[1].bound, bound);
  EXPECT_DOUBLE_EQ(layer->ForwardFlopsPerSample(), 2.0 * 4 * 3 * 2 * 2 * 3 * 3);
  EXPECT_EQ(MakeLayer(kGroupedWithoutBiasSpec, kGroupedInput)->parameter_specs().size(), 1u);

  std::unique_ptr<Layer> plain =
      MakeLayer("name: 'conv' conv2d { out_channels: 8 kernel_size: 5 }", Shape{1, 28, 28});
  EXPECT_EQ(plain->output_shape(), (Shape{8, 24, 24}));
  EXPECT_DOUBLE_EQ(plain->ForwardFlopsPerSample(), 2.0 * 8 * 24 * 24 * 1 * 5 * 5);
  EXPECT_DOUBLE_EQ(plain->parameter_specs()[0].bound, 0.2);
}

absl::Status CreateStatus(const std::string& spec, const Shape& input) {
  return LayerRegistry::WithBuiltins().Create(ParseLayer(spec), input).status();
}

TEST(Conv2dTest, RejectsBadConfigurationNamingTheField) {
  struct Case {
    std::string spec;
    Shape input;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"conv2d { kernel_size: 3 }", Shape{3, 8, 8}, "conv2d.out_channels must be set"},
      {"conv2d { out_channels: 0 kernel_size: 3 }", Shape{3, 8, 8}, "conv2d.out_channels"},
      {"conv2d { out_channels: 4 }", Shape{3, 8, 8},
       "conv2d.kernel_size needs 1 or 2 values >= 1, got none"},
      {"conv2d { out_channels: 4 kernel_size: [3, 3, 3] }", Shape{3, 8, 8},
       "conv2d.kernel_size needs 1 or 2 values >= 1, got [3, 3, 3]"},
      {"conv2d { out_channels: 4 kernel_size: [3, 0] }", Shape{3, 8, 8}, "conv2d.kernel_size"},
      {"conv2d { out_channels: 4 kernel_size: 3 stride: 0 }", Shape{3, 8, 8},
       "conv2d.stride needs 1 or 2 values >= 1"},
      {"conv2d { out_channels: 4 kernel_size: 3 padding: -1 }", Shape{3, 8, 8},
       "conv2d.padding needs 1 or 2 values >= 0"},
      {"conv2d { out_channels: 4 kernel_size: 3 dilation: [1, 2, 3] }", Shape{3, 8, 8},
       "conv2d.dilation needs 1 or 2 values >= 1"},
      {"conv2d { out_channels: 4 kernel_size: 3 groups: 0 }", Shape{3, 8, 8},
       "conv2d.groups must be >= 1"},
      {"conv2d { out_channels: 4 kernel_size: 3 groups: 2 }", Shape{3, 8, 8},
       "conv2d.groups (2) must divide both the input's channels (3"},
      {"conv2d { out_channels: 3 kernel_size: 3 groups: 2 }", Shape{4, 8, 8},
       "conv2d.out_channels (3)"},
      {"conv2d { out_channels: 4 kernel_size: 5 }", Shape{3, 4, 8}, "input [3, 4, 8] is too small"},
      {"conv2d { out_channels: 4 kernel_size: 3 dilation: 3 padding: 1 }", Shape{3, 8, 4},
       "input [3, 8, 4] is too small"},
      {"conv2d { out_channels: 4 kernel_size: 3 }", Shape{3, 8},
       "needs a per-sample input [channels, height, width] with every dimension >= 1, got [3, 8]"},
      {"conv2d { out_channels: 4 kernel_size: 1 }", Shape{2, 3, 4, 5}, "got [2, 3, 4, 5]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec);
    const absl::Status status = CreateStatus("name: 'conv' " + c.spec, c.input);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
  }
}

TEST(Conv2dTest, RejectsInputAndGradientOfTheWrongShape) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(kGroupedSpec, kGroupedInput);
  const std::vector<Tensor> params = UniformParams(*layer, device, 41);
  const LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> bad =
      layer->Forward(ctx, params, UniformTensor(device, Shape{2, 4, 7, 5}, 42, -1, 1), saved);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'conv'"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("[batch, 4, 7, 6]"));
  EXPECT_TRUE(saved.tensors.empty());

  const Tensor x = UniformTensor(device, kGroupedInput.WithBatch(2), 43, -1, 1);
  ASSERT_TRUE(layer->Forward(ctx, params, x, saved).ok());
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  const Tensor wrong = UniformTensor(device, Shape{2, 4, 3, 3}, 44, -1, 1);
  EXPECT_EQ(layer->Backward(ctx, params, grads, saved, wrong).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(layer->split_backward()->BackwardInput(ctx, params, saved, wrong).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(layer->split_backward()->BackwardWeight(ctx, grads, saved, wrong).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpipe::testing
