// max_pool2d, avg_pool2d, global_avg_pool2d and flatten against independently computed values
// (tests/layers/oracles/conv_pool_oracles.py), finite-difference gradients, what they save,
// configuration errors and FLOPs.
#include <cmath>
#include <limits>
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

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

// ((i * mul) % mod - offset) * scale: the oracle script's pattern(), exact in float.
std::vector<float> Pattern(int64_t n, int64_t mul, int64_t mod, int64_t offset, float scale) {
  std::vector<float> values;
  for (int64_t i = 0; i < n; ++i) {
    values.push_back(static_cast<float>((i * mul) % mod - offset) * scale);
  }
  return values;
}

// Forward then Backward of `layer` on x with output gradient dy.
struct Pass {
  Tensor y;
  Tensor dx;
  SavedTensors saved;
};
Pass ForwardBackward(const Layer& layer, Device& device, const Tensor& x,
                     const std::vector<float>& dy_values) {
  const LayerContext ctx{.device = device};
  Pass run;
  absl::StatusOr<Tensor> y = layer.Forward(ctx, {}, x, run.saved);
  EXPECT_TRUE(y.ok()) << y.status();
  if (!y.ok()) return run;
  run.y = *y;
  const Tensor dy = F32Tensor(device, y->shape(), dy_values);
  absl::StatusOr<Tensor> dx = layer.Backward(ctx, {}, {}, run.saved, dy);
  EXPECT_TRUE(dx.ok()) << dx.status();
  if (dx.ok()) run.dx = *dx;
  return run;
}

void ExpectGradientsMatchFiniteDifferences(const std::string& spec, const Tensor& x) {
  SCOPED_TRACE(spec);
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(spec, x.shape().WithoutBatch());
  const LayerContext ctx{.device = device};
  absl::StatusOr<GradientCheckReport> report = CheckLayerGradients(*layer, ctx, {}, x);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->ToString();
}

absl::Status CreateStatus(const std::string& spec, const Shape& input) {
  return LayerRegistry::WithBuiltins().Create(ParseLayer(spec), input).status();
}

// ---- max_pool2d

TEST(MaxPool2dTest, ForwardAndBackwardMatchIndependentValues) {
  CpuDevice device;
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'pool' max_pool2d { kernel_size: 3 stride: 2 padding: 1 }", Shape{2, 5, 5});
  EXPECT_EQ(layer->output_shape(), (Shape{2, 3, 3}));
  const Tensor x = F32Tensor(device, Shape{1, 2, 5, 5}, Pattern(50, 37, 50, 25, 0.25f));
  const Pass run = ForwardBackward(*layer, device, x, Pattern(18, 5, 7, 3, 0.5f));
  EXPECT_EQ(run.y.shape(), (Shape{1, 2, 3, 3}));
  EXPECT_THAT(Values(run.y),
              Pointwise(FloatNear(0.0f),
                        std::vector<float>{3, 5.25, 5.75, 4.25, 5.25, 5.25, 4.25, 4.25, 3.25, 5.5,
                                           6, 2.75, 5.5, 5.5, 4.5, 1.25, 4, 4}));
  EXPECT_THAT(
      Values(run.dx),
      Pointwise(FloatNear(1e-6f),
                std::vector<float>{0, -1.5, 0, 0, 0, 0,    0, 0, 3, 0,  0,  0,   0, 0, 0, 0, -3,
                                   0, 0,    0, 0, 0, 0,    0, 1, 0, 0,  -1, 1.5, 0, 0, 0, 0, 0,
                                   0, 0,    0, 0, 0, -1.5, 1, 0, 0, -1, 0,  0,   0, 0, 0, 0}));
}

TEST(MaxPool2dTest, DilatedWindowsMatchIndependentValues) {
  CpuDevice device;
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'pool' max_pool2d { kernel_size: 2 stride: 1 padding: 1 dilation: 2 }",
                Shape{1, 4, 4});
  EXPECT_EQ(layer->output_shape(), (Shape{1, 4, 4}));
  const Tensor x = F32Tensor(device, Shape{1, 1, 4, 4}, Pattern(16, 5, 16, 8, 0.5f));
  const Pass run = ForwardBackward(*layer, device, x, Pattern(16, 3, 5, 2, 1.0f));
  EXPECT_THAT(Values(run.y),
              Pointwise(FloatNear(0.0f), std::vector<float>{0.5, 3, 0.5, 3, 2.5, 1, 3.5, 1, 0.5, 3,
                                                            1.5, 3, 2.5, 0, 2.5, -3}));
  EXPECT_THAT(Values(run.dx),
              Pointwise(FloatNear(1e-6f),
                        std::vector<float>{0, 0, -3, 1, 0, -1, 4, 0, 2, -1, -2, 0, 0, 0, 0, -2}));
}

TEST(MaxPool2dTest, TiesSendTheGradientToTheFirstMaximumAndPaddingIsMinusInfinity) {
  CpuDevice device;
  // One 2x2 window of equal values: the gradient goes to the first in row-major order.
  std::unique_ptr<Layer> tie =
      MakeLayer("name: 'pool' max_pool2d { kernel_size: 2 }", Shape{1, 2, 2});
  const Pass tied =
      ForwardBackward(*tie, device, F32Tensor(device, Shape{1, 1, 2, 2}, {1, 1, 1, 1}), {5.0f});
  EXPECT_THAT(Values(tied.y), ElementsAre(1.0f));
  EXPECT_THAT(Values(tied.dx), ElementsAre(5.0f, 0.0f, 0.0f, 0.0f));

  // Negative inputs with padding: the padded taps never win (they are -inf, not 0).
  std::unique_ptr<Layer> padded =
      MakeLayer("name: 'pool' max_pool2d { kernel_size: 3 stride: 1 padding: 1 }", Shape{1, 1, 2});
  const Pass run = ForwardBackward(*padded, device,
                                   F32Tensor(device, Shape{1, 1, 1, 2}, {-2.0f, -3.0f}), {1, 10});
  EXPECT_THAT(Values(run.y), ElementsAre(-2.0f, -2.0f));
  EXPECT_THAT(Values(run.dx), ElementsAre(11.0f, 0.0f));

  // A NaN propagates to the window's output.
  const Pass nan = ForwardBackward(
      *tie, device,
      F32Tensor(device, Shape{1, 1, 2, 2}, {1, std::numeric_limits<float>::quiet_NaN(), 3, 2}),
      {1.0f});
  EXPECT_TRUE(std::isnan(Values(nan.y)[0]));
}

TEST(MaxPool2dTest, GradientsMatchFiniteDifferences) {
  CpuDevice device;
  // Distinct values at least 0.05 apart, so a +-0.01 step never changes a window's maximum.
  const Tensor x = F32Tensor(device, Shape{2, 2, 6, 7}, Pattern(168, 5, 168, 84, 0.05f));
  ExpectGradientsMatchFiniteDifferences(
      "name: 'pool' max_pool2d { kernel_size: 3 stride: 2 padding: 1 }", x);
  ExpectGradientsMatchFiniteDifferences(
      "name: 'pool' max_pool2d { kernel_size: [2, 3] stride: [1, 2] padding: 1 dilation: 2 }", x);
  ExpectGradientsMatchFiniteDifferences("name: 'pool' max_pool2d { kernel_size: 2 }", x);
}

// No index tensor: Backward finds each maximum again from the input and output it shares.
TEST(MaxPool2dTest, SavesItsInputAndOutputOnlyAndCountsOneOperationPerTap) {
  CpuDevice device;
  // Stride defaults to the kernel size: [3, 8, 6] -> [3, 4, 3].
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'pool' max_pool2d { kernel_size: 2 }", Shape{3, 8, 6});
  EXPECT_EQ(layer->output_shape(), (Shape{3, 4, 3}));
  EXPECT_EQ(layer->type(), "max_pool2d");
  EXPECT_TRUE(layer->parameter_specs().empty());
  EXPECT_FALSE(layer->SplitsBackward());
  const std::vector<SavedSpec> specs = layer->SavedPerSample();
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].ref, SavedRef::kInput);
  EXPECT_EQ(specs[1].ref, SavedRef::kOutput);
  EXPECT_DOUBLE_EQ(layer->ForwardFlopsPerSample(), 3.0 * 4 * 3 * 2 * 2);

  const Tensor x = UniformTensor(device, Shape{2, 3, 8, 6}, 1, -1, 1);
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(LayerContext{.device = device}, {}, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(saved.tensors.size(), 2u);
  EXPECT_TRUE(saved.tensors[0].SharesStorageWith(x));
  EXPECT_TRUE(saved.tensors[1].SharesStorageWith(*y));
}

// ---- avg_pool2d

TEST(AvgPool2dTest, ForwardAndBackwardMatchIndependentValues) {
  CpuDevice device;
  const Tensor x = F32Tensor(device, Shape{1, 1, 5, 5}, Pattern(25, 7, 13, 6, 0.25f));
  const std::vector<float> dy = Pattern(18, 5, 7, 3, 0.5f);
  {
    SCOPED_TRACE("count_include_pad");
    std::unique_ptr<Layer> layer =
        MakeLayer("name: 'pool' avg_pool2d { kernel_size: [3, 2] stride: [2, 1] padding: 1 }",
                  Shape{1, 5, 5});
    EXPECT_EQ(layer->output_shape(), (Shape{1, 3, 6}));
    const Pass run = ForwardBackward(*layer, device, x, dy);
    EXPECT_THAT(
        Values(run.y),
        Pointwise(FloatNear(1e-6f),
                  std::vector<float>{-0.125, -0.208333333, -0.125, -0.0416666667, 0.0416666667,
                                     0.0416666667, -0.125, 0.0833333333, 0.208333333, -0.208333333,
                                     -0.0833333333, 0.125, -0.0416666667, -0.0416666667,
                                     0.0416666667, 0.125, 0.208333333, 0.125}));
    EXPECT_THAT(Values(run.dx), Pointwise(FloatNear(1e-6f), std::vector<float>{-0.0833333333,
                                                                               0.166666667,
                                                                               -0.166666667,
                                                                               0.0833333333,
                                                                               0.333333333,
                                                                               -0.416666667,
                                                                               0.0833333333,
                                                                               0,
                                                                               -0.0833333333,
                                                                               0.416666667,
                                                                               -0.333333333,
                                                                               -0.0833333333,
                                                                               0.166666667,
                                                                               -0.166666667,
                                                                               0.0833333333,
                                                                               -0.333333333,
                                                                               -0.416666667,
                                                                               0.0833333333,
                                                                               0,
                                                                               -0.0833333333,
                                                                               0,
                                                                               -0.333333333,
                                                                               -0.0833333333,
                                                                               0.166666667,
                                                                               -0.166666667}));
  }
  {
    SCOPED_TRACE("!count_include_pad");
    std::unique_ptr<Layer> layer = MakeLayer(
        "name: 'pool' avg_pool2d { kernel_size: [3, 2] stride: [2, 1] padding: 1 "
        "count_include_pad: false }",
        Shape{1, 5, 5});
    const Pass run = ForwardBackward(*layer, device, x, dy);
    EXPECT_THAT(
        Values(run.y),
        Pointwise(FloatNear(1e-6f),
                  std::vector<float>{-0.375, -0.3125, -0.1875, -0.0625, 0.0625, 0.125, -0.25,
                                     0.0833333333, 0.208333333, -0.208333333, -0.0833333333, 0.25,
                                     -0.125, -0.0625, 0.0625, 0.1875, 0.3125, 0.375}));
    EXPECT_THAT(
        Values(run.dx),
        Pointwise(FloatNear(1e-6f),
                  std::vector<float>{
                      -0.5,         0.25,          -0.25,         0.125,         0.625,
                      -0.916666667, 0.166666667,   -0.0833333333, -0.0416666667, 0.958333333,
                      -0.416666667, -0.0833333333, 0.166666667,   -0.166666667,  0.333333333,
                      -0.291666667, -0.583333333,  0.0416666668,  0.0833333333,  -0.166666667,
                      0.125,        -0.5,          -0.125,        0.25,          -0.5}));
  }
}

TEST(AvgPool2dTest, GradientsMatchFiniteDifferences) {
  CpuDevice device;
  const Tensor x = UniformTensor(device, Shape{2, 2, 6, 7}, 3, -1.0f, 1.0f);
  ExpectGradientsMatchFiniteDifferences(
      "name: 'pool' avg_pool2d { kernel_size: 3 stride: 2 padding: 1 }", x);
  ExpectGradientsMatchFiniteDifferences(
      "name: 'pool' avg_pool2d { kernel_size: [2, 3] stride: [1, 2] padding: [1, 1] "
      "count_include_pad: false }",
      x);
}

TEST(AvgPool2dTest, SavesNothingAndCountsOneOperationPerTap) {
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'pool' avg_pool2d { kernel_size: 3 stride: 2 padding: 1 }", Shape{3, 8, 6});
  EXPECT_EQ(layer->output_shape(), (Shape{3, 4, 3}));
  EXPECT_EQ(layer->type(), "avg_pool2d");
  EXPECT_TRUE(layer->SavedPerSample().empty());
  EXPECT_DOUBLE_EQ(layer->ForwardFlopsPerSample(), 3.0 * 4 * 3 * 3 * 3);
}

// ---- global_avg_pool2d

TEST(GlobalAvgPool2dTest, ForwardAndBackwardMatchIndependentValues) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'gap' global_avg_pool2d {}", Shape{3, 2, 2});
  EXPECT_EQ(layer->output_shape(), (Shape{3}));
  EXPECT_EQ(layer->type(), "global_avg_pool2d");
  EXPECT_TRUE(layer->SavedPerSample().empty());
  EXPECT_DOUBLE_EQ(layer->ForwardFlopsPerSample(), 12.0);
  const Tensor x = F32Tensor(device, Shape{2, 3, 2, 2}, Pattern(24, 5, 11, 5, 0.25f));
  const Pass run = ForwardBackward(*layer, device, x, Pattern(6, 1, 6, 2, 1.0f));
  EXPECT_EQ(run.y.shape(), (Shape{2, 3}));
  EXPECT_THAT(Values(run.y), Pointwise(FloatNear(1e-6f),
                                       std::vector<float>{-0.0625, 0.125, -0.375, 0.5, 0, -0.5}));
  EXPECT_THAT(Values(run.dx),
              Pointwise(FloatNear(1e-6f),
                        std::vector<float>{-0.5, -0.5, -0.5, -0.5, -0.25, -0.25, -0.25, -0.25,
                                           0,    0,    0,    0,    0.25,  0.25,  0.25,  0.25,
                                           0.5,  0.5,  0.5,  0.5,  0.75,  0.75,  0.75,  0.75}));
  EXPECT_TRUE(run.saved.tensors.empty());
}

TEST(GlobalAvgPool2dTest, GradientsMatchFiniteDifferences) {
  CpuDevice device;
  ExpectGradientsMatchFiniteDifferences("name: 'gap' global_avg_pool2d {}",
                                        UniformTensor(device, Shape{2, 3, 4, 5}, 4, -1, 1));
}

// ---- flatten

TEST(FlattenTest, ReturnsViewsOfTheInputAndOfTheOutputGradient) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'flat' flatten {}", Shape{2, 3, 4});
  EXPECT_EQ(layer->output_shape(), (Shape{24}));
  EXPECT_EQ(layer->type(), "flatten");
  EXPECT_TRUE(layer->SavedPerSample().empty());
  EXPECT_DOUBLE_EQ(layer->ForwardFlopsPerSample(), 0.0);
  const Tensor x = UniformTensor(device, Shape{2, 2, 3, 4}, 5, -1, 1);
  const LayerContext ctx{.device = device};
  const int64_t before = device.memory().current();
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, {}, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 24}));
  EXPECT_TRUE(y->SharesStorageWith(x));
  EXPECT_EQ(Values(*y), Values(x));
  EXPECT_TRUE(saved.tensors.empty());

  const Tensor dy = UniformTensor(device, Shape{2, 24}, 6, -1, 1);
  absl::StatusOr<Tensor> dx = layer->Backward(ctx, {}, {}, saved, dy);
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_EQ(dx->shape(), (Shape{2, 2, 3, 4}));
  EXPECT_TRUE(dx->SharesStorageWith(dy));
  EXPECT_EQ(Values(*dx), Values(dy));
  EXPECT_EQ(device.memory().current() - before, dy.bytes());  // only the test's dy

  const LayerContext no_input_grad{.device = device, .need_input_grad = false};
  absl::StatusOr<Tensor> none = layer->Backward(no_input_grad, {}, {}, saved, dy);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->defined());

  EXPECT_EQ(MakeLayer("name: 'flat' flatten {}", Shape{7})->output_shape(), (Shape{7}));
}

// ---- errors shared by the window layers

TEST(PoolTest, RejectsBadConfigurationNamingTheFieldOrShape) {
  struct Case {
    std::string spec;
    Shape input;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"max_pool2d {}", Shape{3, 8, 8},
       "max_pool2d.kernel_size needs 1 or 2 values >= 1, got none"},
      {"max_pool2d { kernel_size: [2, 2, 2] }", Shape{3, 8, 8},
       "max_pool2d.kernel_size needs 1 or 2 values >= 1, got [2, 2, 2]"},
      {"max_pool2d { kernel_size: 2 stride: 0 }", Shape{3, 8, 8}, "max_pool2d.stride"},
      {"max_pool2d { kernel_size: 2 padding: -1 }", Shape{3, 8, 8}, "max_pool2d.padding"},
      {"max_pool2d { kernel_size: 2 dilation: 0 }", Shape{3, 8, 8}, "max_pool2d.dilation"},
      {"max_pool2d { kernel_size: 3 padding: 2 }", Shape{3, 8, 8},
       "max_pool2d.padding must be at most half the kernel size (kernel 3x3 allows padding up to "
       "1x1), got 2x2"},
      {"max_pool2d { kernel_size: [4, 2] padding: [2, 2] }", Shape{3, 8, 8},
       "max_pool2d.padding must be at most half"},
      {"max_pool2d { kernel_size: 5 }", Shape{3, 4, 8}, "input [3, 4, 8] is too small"},
      {"max_pool2d { kernel_size: 2 }", Shape{8, 8}, "got [8, 8]"},
      {"avg_pool2d {}", Shape{3, 8, 8}, "avg_pool2d.kernel_size"},
      {"avg_pool2d { kernel_size: [2, 3] stride: [1, 2, 3] }", Shape{3, 8, 8},
       "avg_pool2d.stride needs 1 or 2 values >= 1, got [1, 2, 3]"},
      {"avg_pool2d { kernel_size: 2 padding: 2 }", Shape{3, 8, 8},
       "avg_pool2d.padding must be at most half"},
      {"avg_pool2d { kernel_size: 3 }", Shape{3, 2, 8}, "input [3, 2, 8] is too small"},
      {"avg_pool2d { kernel_size: 2 }", Shape{1, 3, 8, 8}, "got [1, 3, 8, 8]"},
      {"global_avg_pool2d {}", Shape{16},
       "global_avg_pool2d needs a per-sample input [channels, "
       "height, width] with every dimension >= 1, got [16]"},
      {"global_avg_pool2d {}", Shape{3, 0, 2}, "got [3, 0, 2]"},
      {"flatten {}", Shape{}, "flatten needs a per-sample input of rank >= 1, got []"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec);
    const absl::Status status = CreateStatus("name: 'pool' " + c.spec, c.input);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
  }
}

TEST(PoolTest, RejectInputAndGradientOfTheWrongShape) {
  CpuDevice device;
  const LayerContext ctx{.device = device};
  for (const char* spec :
       {"name: 'p7' max_pool2d { kernel_size: 2 }", "name: 'p7' avg_pool2d { kernel_size: 2 }",
        "name: 'p7' global_avg_pool2d {}", "name: 'p7' flatten {}"}) {
    SCOPED_TRACE(spec);
    std::unique_ptr<Layer> layer = MakeLayer(spec, Shape{2, 4, 4});
    SavedTensors saved;
    absl::StatusOr<Tensor> bad =
        layer->Forward(ctx, {}, UniformTensor(device, Shape{3, 2, 4, 5}, 7, -1, 1), saved);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'p7'"));
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr("[batch, 2, 4, 4]"));

    ASSERT_TRUE(
        layer->Forward(ctx, {}, UniformTensor(device, Shape{3, 2, 4, 4}, 8, -1, 1), saved).ok());
    absl::StatusOr<Tensor> dx =
        layer->Backward(ctx, {}, {}, saved, UniformTensor(device, Shape{3, 5}, 9, -1, 1));
    ASSERT_FALSE(dx.ok());
    EXPECT_EQ(dx.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(dx.status().message()), HasSubstr("'p7'"));
  }
}

}  // namespace
}  // namespace gpipe::testing
