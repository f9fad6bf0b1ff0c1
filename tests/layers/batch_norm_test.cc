// batch_norm1d / batch_norm2d against independently computed values
// (tests/layers/oracles/batch_norm_oracles.py): training forward and backward, the running
// statistics (PyTorch's momentum rule, unbiased running_var), a re-materialized replay that
// leaves them alone, evaluation with them, finite differences, the per-call (micro-batch)
// statistics, parameters, buffers, saved tensors and configuration rules.
#include <cmath>
#include <cstring>
#include <limits>
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
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

// Element i is (((7 i + 3 salt) mod 17) - 8) * scale, as in batch_norm_oracles.py.
std::vector<float> PatternValues(int64_t n, int salt, double scale) {
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) {
    values[i] = static_cast<float>(static_cast<double>((7 * i + 3 * salt) % 17 - 8) * scale);
  }
  return values;
}

Tensor PatternTensor(Device& device, const Shape& shape, int salt, double scale) {
  return F32Tensor(device, shape, PatternValues(shape.num_elements(), salt, scale));
}

// The oracle's weight: 1 + Pattern(C, salt, 0.0625), never 0.
Tensor OracleWeight(Device& device, int64_t channels, int salt) {
  std::vector<float> values = PatternValues(channels, salt, 0.0625);
  for (float& v : values) v += 1.0f;
  return F32Tensor(device, Shape{channels}, values, MemoryKind::kParameter);
}

// Buffers as the layer's buffer_specs() initialize them (running_mean zeros, running_var ones).
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

struct OracleCase {
  std::string spec;
  Shape sample;
  int64_t batch;
  int salt;  // x: salt, weight: salt + 1, bias: salt + 2, dy: salt + 3
  bool affine;
  std::vector<float> y, dx, dweight, dbias;
};

// Runs one training Forward and Backward on the oracle's inputs and compares.
void ExpectMatchesOracle(const OracleCase& c) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(c.spec, c.sample);
  const int64_t channels = c.sample.dim(0);
  std::vector<Tensor> params;
  if (c.affine) {
    params.push_back(OracleWeight(device, channels, c.salt + 1));
    params.push_back(PatternTensor(device, Shape{channels}, c.salt + 2, 0.0625));
  }
  std::vector<Tensor> buffers = InitialBuffers(*layer, device);
  const LayerContext ctx{.device = device, .buffers = buffers};
  const Tensor x = PatternTensor(device, c.sample.WithBatch(c.batch), c.salt, 0.25);
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), x.shape());
  EXPECT_THAT(Values(*y), Pointwise(FloatNear(2e-6), c.y));

  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  absl::StatusOr<Tensor> dx = layer->Backward(ctx, params, grads, saved,
                                              PatternTensor(device, x.shape(), c.salt + 3, 0.25));
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_THAT(Values(*dx), Pointwise(FloatNear(1e-5), c.dx));
  ASSERT_EQ(grads.size(), c.affine ? 2u : 0u);
  if (c.affine) {
    EXPECT_THAT(Values(grads[0]), Pointwise(FloatNear(1e-5), c.dweight));
    EXPECT_THAT(Values(grads[1]), Pointwise(FloatNear(1e-5), c.dbias));
  }
}

TEST(BatchNormTest, OneDimensionalOnChannelsMatchesIndependentValues) {
  ExpectMatchesOracle(
      {"name: 'bn' batch_norm1d {}",
       Shape{3},
       4,
       1,
       true,
       {-1.11143099f, 1.16631872f, -1.04737435f, -0.328810331f, 2.23242868f, -0.432458117f,
        0.453810331f, -1.23242868f, 0.182458117f, 1.23643099f, -0.166318723f, 0.797374351f},
       {-0.332607208f, -1.21448862f, -0.261334233f, 0.997843534f, 0.467103433f, 0.78401992f,
        -0.997843536f, -0.467103433f, -0.784019919f, 0.332607208f, 1.21448862f, 0.261334233f},
       {-3.13048265f, -2.84295988f, -3.13048265f},
       {1.5f, 0.0f, -1.5f}});
}

TEST(BatchNormTest, OneDimensionalOnChannelsAndLengthMatchesIndependentValues) {
  ExpectMatchesOracle(
      {"name: 'bn' batch_norm1d {}",
       Shape{2, 3},
       2,
       5,
       true,
       {0.498458592f, -0.748972395f, 0.124229296f, -0.822408148f, 0.503096296f, 1.82860074f,
        -0.624229296f, 0.248972395f, -0.998458592f, 0.692454074f, -1.2011237f, 0.124380741f},
       {0.295493217f, 0.156443302f, -0.38241156f, 0.275739976f, -1.19272826f, 0.557885732f,
        0.38241156f, -0.156443301f, -0.295493217f, -0.942640544f, -0.224435448f, 1.52617854f},
       {-5.48869634f, -2.54055019f},
       {2.25f, -0.25f}});
}

TEST(BatchNormTest, TwoDimensionalMatchesIndependentValues) {
  ExpectMatchesOracle(
      {"name: 'bn' batch_norm2d {}",
       Shape{2, 2, 3},
       2,
       9,
       true,
       {0.908252589f,  -1.97353039f,   0.043717695f,  2.06096578f,   -0.820817199f, 1.19643089f,
        -0.888218461f, 0.0545808144f,  0.99738009f,   -0.349476018f, 0.593323258f,  -0.753532851f,
        0.620074291f,  2.63732238f,    -0.244460603f, 1.77278748f,   -1.1089955f,   0.908252589f,
        -1.02290407f,  -0.0801047964f, 0.862694479f,  -0.484161629f, 0.458637647f,  -0.888218461f},
       {-1.40230227f,  -1.01358185f, 2.1436356f,    0.401821993f,   0.790542408f,  -0.951271202f,
        -0.15256022f,  -1.07525977f, 0.291696067f,  0.628557404f,   -0.29414215f,  0.0427191855f,
        -1.85333333f,  1.30388412f,  1.69260454f,   -0.0492090741f, 0.339511344f,  -1.40230227f,
        -0.347839621f, 1.01911621f,  0.0964166595f, 0.433277998f,   -0.489421553f, -0.152560215f},
       {-7.72134868f, -6.88937306f},
       {-1.0f, 1.75f}});
}

TEST(BatchNormTest, WithoutAffineMatchesIndependentValues) {
  ExpectMatchesOracle(
      {"name: 'bn' batch_norm1d { affine: false }",
       Shape{3},
       4,
       13,
       false,
       {-0.363420638f, 0.507671408f, -1.34163542f, 0.467255106f, 1.31994566f, -0.447211807f,
        1.29793085f, -1.31994566f, 0.447211807f, -1.40176532f, -0.507671408f, 1.34163542f},
       {1.19899563f, -0.925324664f, -0.380122523f, -1.03722697f, 0.355888329f, 1.14039261f,
        0.256922339f, -0.355888329f, -1.14039261f, -0.418691003f, 0.925324666f, 0.380122523f},
       {},
       {}});
}

TEST(BatchNormTest, UsesTheEpsFromThePlan) {
  CpuDevice device;
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'bn' batch_norm2d { eps: 0.5 affine: false }", Shape{2, 2, 2});
  std::vector<Tensor> buffers = InitialBuffers(*layer, device);
  const LayerContext ctx{.device = device, .buffers = buffers};
  SavedTensors saved;
  absl::StatusOr<Tensor> y =
      layer->Forward(ctx, {}, PatternTensor(device, Shape{2, 2, 2, 2}, 25, 0.25), saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(Values(*y), Pointwise(FloatNear(2e-6),
                                    {-0.445000262f, 0.866579457f, -1.00710586f, 0.304473863f,
                                     -1.24131652f, 0.0702631993f, 1.38184292f, -0.491842395f,
                                     0.491842395f, -1.38184292f, -0.0702631993f, 1.24131652f,
                                     -0.304473863f, 1.00710586f, -0.866579457f, 0.445000262f}));
}

// running = (1 - m) running + m stat, running_var from the unbiased variance.
TEST(BatchNormTest, TrainingUpdatesTheRunningStatisticsOncePerCall) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'bn' batch_norm1d {}", Shape{3});
  const std::vector<Tensor> params = UniformParams(*layer, device, 3);
  std::vector<Tensor> buffers = InitialBuffers(*layer, device);
  const LayerContext ctx{.device = device, .buffers = buffers};
  SavedTensors saved;
  ASSERT_TRUE(
      layer->Forward(ctx, params, PatternTensor(device, Shape{4, 3}, 20, 0.25), saved).ok());
  EXPECT_THAT(Values(buffers[0]), Pointwise(FloatNear(1e-7), {-0.0375f, 0.03125f, -0.00625f}));
  EXPECT_THAT(Values(buffers[1]),
              Pointwise(FloatNear(1e-6), {1.10208333f, 1.09322917f, 1.09322917f}));
  saved.clear();
  ASSERT_TRUE(layer->Forward(ctx, params, PatternTensor(device, Shape{4, 3}, 21, 0.5), saved).ok());
  EXPECT_THAT(Values(buffers[0]), Pointwise(FloatNear(1e-7), {0.04125f, 0.028125f, -0.080625f}));
  EXPECT_THAT(Values(buffers[1]),
              Pointwise(FloatNear(1e-6), {1.80020833f, 1.65057292f, 1.79223958f}));
}

TEST(BatchNormTest, MomentumOneKeepsOnlyTheLatestStatistics) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'bn' batch_norm1d { momentum: 1 }", Shape{3});
  const std::vector<Tensor> params = UniformParams(*layer, device, 3);
  std::vector<Tensor> buffers = InitialBuffers(*layer, device);
  const LayerContext ctx{.device = device, .buffers = buffers};
  SavedTensors saved;
  ASSERT_TRUE(
      layer->Forward(ctx, params, PatternTensor(device, Shape{4, 3}, 20, 0.25), saved).ok());
  EXPECT_THAT(Values(buffers[0]), Pointwise(FloatNear(1e-7), {-0.375f, 0.3125f, -0.0625f}));
  EXPECT_THAT(Values(buffers[1]),
              Pointwise(FloatNear(1e-6), {2.02083333f, 1.93229167f, 1.93229167f}));
}

// A re-materialized forward replays a micro-batch whose first forward already updated the
// running statistics: it must leave them alone and rebuild exactly what the first one saved.
TEST(BatchNormTest, ReplayWithoutBufferUpdateLeavesBuffersAndReproducesForward) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'bn' batch_norm2d {}", Shape{3, 4, 4});
  const std::vector<Tensor> params = UniformParams(*layer, device, 5);
  const Tensor x = UniformTensor(device, Shape{2, 3, 4, 4}, 6, -2.0f, 3.0f);
  std::vector<Tensor> buffers = InitialBuffers(*layer, device);
  // Start from statistics that are neither zeros nor ones.
  SavedTensors earlier;
  ASSERT_TRUE(layer
                  ->Forward({.device = device, .buffers = buffers}, params,
                            UniformTensor(device, Shape{2, 3, 4, 4}, 7, -1.0f, 1.0f), earlier)
                  .ok());

  const LayerContext first{.device = device, .buffers = buffers};
  SavedTensors first_saved;
  absl::StatusOr<Tensor> first_y = layer->Forward(first, params, x, first_saved);
  ASSERT_TRUE(first_y.ok()) << first_y.status();
  const std::vector<float> mean_after = Values(buffers[0]);
  const std::vector<float> var_after = Values(buffers[1]);
  absl::StatusOr<Tensor> mean_copy = buffers[0].Clone(MemoryKind::kParameter);
  absl::StatusOr<Tensor> var_copy = buffers[1].Clone(MemoryKind::kParameter);
  ASSERT_TRUE(mean_copy.ok() && var_copy.ok());

  const LayerContext replay{.device = device, .buffers = buffers, .update_buffers = false};
  SavedTensors replay_saved;
  absl::StatusOr<Tensor> replay_y = layer->Forward(replay, params, x, replay_saved);
  ASSERT_TRUE(replay_y.ok()) << replay_y.status();
  EXPECT_TRUE(BitIdentical(buffers[0], *mean_copy));
  EXPECT_TRUE(BitIdentical(buffers[1], *var_copy));
  EXPECT_TRUE(BitIdentical(*replay_y, *first_y));
  ASSERT_EQ(replay_saved.tensors.size(), first_saved.tensors.size());
  for (size_t i = 0; i < first_saved.tensors.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(BitIdentical(replay_saved.tensors[i], first_saved.tensors[i]));
  }
  // And the backward from the replayed tensors is the backward from the first ones.
  const Tensor dy = UniformTensor(device, x.shape(), 8, -1.0f, 1.0f);
  std::vector<Tensor> first_grads = ZeroGrads(*layer, device);
  std::vector<Tensor> replay_grads = ZeroGrads(*layer, device);
  absl::StatusOr<Tensor> first_dx = layer->Backward(first, params, first_grads, first_saved, dy);
  absl::StatusOr<Tensor> replay_dx =
      layer->Backward(replay, params, replay_grads, replay_saved, dy);
  ASSERT_TRUE(first_dx.ok() && replay_dx.ok());
  EXPECT_TRUE(BitIdentical(*replay_dx, *first_dx));
  for (size_t p = 0; p < first_grads.size(); ++p) {
    EXPECT_TRUE(BitIdentical(replay_grads[p], first_grads[p]));
  }
  // Backward never touches the buffers either.
  EXPECT_EQ(Values(buffers[0]), mean_after);
  EXPECT_EQ(Values(buffers[1]), var_after);
}

TEST(BatchNormTest, EvaluationNormalizesWithTheRunningStatisticsAndSavesNothing) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'bn' batch_norm1d {}", Shape{3});
  const std::vector<Tensor> params = {
      OracleWeight(device, 3, 23),
      F32Tensor(device, Shape{3}, PatternValues(3, 24, 0.0625), MemoryKind::kParameter)};
  std::vector<Tensor> buffers = InitialBuffers(*layer, device);
  const LayerContext train{.device = device, .buffers = buffers};
  SavedTensors saved;
  ASSERT_TRUE(
      layer->Forward(train, params, PatternTensor(device, Shape{4, 3}, 20, 0.25), saved).ok());
  saved.clear();
  ASSERT_TRUE(
      layer->Forward(train, params, PatternTensor(device, Shape{4, 3}, 21, 0.5), saved).ok());
  saved.clear();
  const std::vector<float> mean = Values(buffers[0]);
  const std::vector<float> var = Values(buffers[1]);

  const LayerContext eval{.device = device, .training = false, .buffers = buffers};
  absl::StatusOr<Tensor> y =
      layer->Forward(eval, params, PatternTensor(device, Shape{2, 3}, 22, 0.25), saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(Values(*y), Pointwise(FloatNear(2e-6), {0.466371772f, -0.418162515f, 0.722835608f,
                                                      -0.89614952f, 0.36019895f, 1.79659904f}));
  EXPECT_TRUE(saved.tensors.empty());
  EXPECT_EQ(Values(buffers[0]), mean);
  EXPECT_EQ(Values(buffers[1]), var);
  // One sample is fine in evaluation: nothing is estimated from the batch.
  absl::StatusOr<Tensor> single =
      layer->Forward(eval, params, PatternTensor(device, Shape{1, 3}, 22, 0.25), saved);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_THAT(Values(*single),
              Pointwise(FloatNear(2e-6), {0.466371772f, -0.418162515f, 0.722835608f}));
}

// Statistics are the call's own: a micro-batch is normalized by itself, so splitting a batch
// changes the result (GPipe's semantics), and each half alone is zero-mean per channel.
TEST(BatchNormTest, EachCallNormalizesWithItsOwnStatistics) {
  CpuDevice device;
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'bn' batch_norm1d { affine: false }", Shape{2, 3});
  std::vector<Tensor> buffers = InitialBuffers(*layer, device);
  const LayerContext ctx{.device = device, .buffers = buffers, .update_buffers = false};
  const Tensor whole = UniformTensor(device, Shape{4, 2, 3}, 9, -1.0f, 1.0f);
  std::vector<float> values = Values(whole);
  // The second half is shifted, so the halves' means differ from the whole batch's.
  for (size_t i = values.size() / 2; i < values.size(); ++i) values[i] += 2.0f;
  const Tensor x = F32Tensor(device, Shape{4, 2, 3}, values);
  const Tensor first =
      F32Tensor(device, Shape{2, 2, 3}, std::vector<float>(values.begin(), values.begin() + 12));
  const Tensor second =
      F32Tensor(device, Shape{2, 2, 3}, std::vector<float>(values.begin() + 12, values.end()));
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, {}, x, saved);
  absl::StatusOr<Tensor> y1 = layer->Forward(ctx, {}, first, saved);
  absl::StatusOr<Tensor> y2 = layer->Forward(ctx, {}, second, saved);
  ASSERT_TRUE(y.ok() && y1.ok() && y2.ok());
  const std::vector<float> all = Values(*y);
  std::vector<float> halves = Values(*y1);
  for (float v : Values(*y2)) halves.push_back(v);
  double largest_difference = 0.0;
  for (size_t i = 0; i < all.size(); ++i) {
    largest_difference = std::max(largest_difference, std::fabs(double{all[i]} - halves[i]));
  }
  EXPECT_GT(largest_difference, 0.5);
  // Within each half, every channel has mean 0 over its samples and positions.
  for (const Tensor* half : {&*y1, &*y2}) {
    const std::vector<float> v = Values(*half);
    for (int c = 0; c < 2; ++c) {
      double sum = 0.0;
      for (int b = 0; b < 2; ++b) {
        for (int s = 0; s < 3; ++s) sum += v[(b * 2 + c) * 3 + s];
      }
      EXPECT_NEAR(sum / 6.0, 0.0, 1e-6);
    }
  }
}

struct GradientCase {
  std::string name;
  std::string spec;
  Shape sample;
  int64_t batch;
};

void PrintTo(const GradientCase& c, std::ostream* os) { *os << c.name; }

class BatchNormGradientTest : public ::testing::TestWithParam<GradientCase> {};

TEST_P(BatchNormGradientTest, AnalyticGradientsMatchCentralDifferences) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(GetParam().spec, GetParam().sample);
  const std::vector<Tensor> params = UniformParams(*layer, device, 11, 0.5f, 1.5f);
  std::vector<Tensor> buffers = InitialBuffers(*layer, device);
  const Tensor x =
      UniformTensor(device, GetParam().sample.WithBatch(GetParam().batch), 12, -2.0f, 2.0f);
  int64_t param_elements = 0;
  for (const Tensor& p : params) param_elements += p.num_elements();
  for (bool need_input_grad : {true, false}) {
    SCOPED_TRACE(need_input_grad);
    if (!need_input_grad && params.empty()) continue;  // nothing left to check
    const LayerContext ctx{.device = device,
                           .need_input_grad = need_input_grad,
                           .buffers = buffers,
                           .update_buffers = false};
    absl::StatusOr<GradientCheckReport> report = CheckLayerGradients(*layer, ctx, params, x);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->checked, param_elements + (need_input_grad ? x.num_elements() : 0));
    EXPECT_TRUE(report->ok()) << report->ToString();
  }
  // update_buffers = false throughout: the checker's many forwards left the buffers alone.
  EXPECT_THAT(Values(buffers[0]), ::testing::Each(0.0f));
  EXPECT_THAT(Values(buffers[1]), ::testing::Each(1.0f));
}

INSTANTIATE_TEST_SUITE_P(
    Configurations, BatchNormGradientTest,
    ::testing::Values(
        GradientCase{"OneDimensionalChannels", "name: 'bn' batch_norm1d {}", Shape{3}, 5},
        GradientCase{"OneDimensionalChannelsAndLength", "name: 'bn' batch_norm1d {}", Shape{2, 4},
                     3},
        GradientCase{"OneDimensionalWithoutAffine", "name: 'bn' batch_norm1d { affine: false }",
                     Shape{2, 3}, 3},
        GradientCase{"TwoDimensional", "name: 'bn' batch_norm2d {}", Shape{2, 3, 2}, 2},
        GradientCase{"TwoDimensionalWithoutAffine", "name: 'bn' batch_norm2d { affine: false }",
                     Shape{2, 2, 3}, 2}),
    [](const ::testing::TestParamInfo<GradientCase>& info) { return info.param.name; });

TEST(BatchNormTest, WithoutInputGradientReturnsAnUndefinedTensorAndTheSameGrads) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'bn' batch_norm2d {}", Shape{3, 2, 2});
  const std::vector<Tensor> params = UniformParams(*layer, device, 3);
  std::vector<Tensor> buffers = InitialBuffers(*layer, device);
  const Tensor x = UniformTensor(device, Shape{2, 3, 2, 2}, 4, -1.0f, 1.0f);
  const Tensor dy = UniformTensor(device, Shape{2, 3, 2, 2}, 5, -1.0f, 1.0f);
  std::vector<std::vector<Tensor>> grads;
  for (bool need_input_grad : {true, false}) {
    const LayerContext ctx{
        .device = device, .need_input_grad = need_input_grad, .buffers = buffers};
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

TEST(BatchNormTest, ParametersBuffersAndSavedTensors) {
  std::unique_ptr<Layer> layer = MakeLayer("name: 'bn' batch_norm2d {}", Shape{5, 4, 3});
  EXPECT_EQ(layer->type(), "batch_norm2d");
  EXPECT_EQ(layer->output_shape(), (Shape{5, 4, 3}));
  const std::vector<ParamSpec> params = layer->parameter_specs();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].name, "weight");
  EXPECT_EQ(params[0].shape, (Shape{5}));
  EXPECT_EQ(params[0].init, ParamInit::kOnes);
  EXPECT_EQ(params[1].name, "bias");
  EXPECT_EQ(params[1].shape, (Shape{5}));
  EXPECT_EQ(params[1].init, ParamInit::kZeros);
  const std::vector<ParamSpec> buffers = layer->buffer_specs();
  ASSERT_EQ(buffers.size(), 2u);
  EXPECT_EQ(buffers[0].name, "running_mean");
  EXPECT_EQ(buffers[0].shape, (Shape{5}));
  EXPECT_EQ(buffers[0].init, ParamInit::kZeros);
  EXPECT_EQ(buffers[1].name, "running_var");
  EXPECT_EQ(buffers[1].shape, (Shape{5}));
  EXPECT_EQ(buffers[1].init, ParamInit::kOnes);
  // The input (shared) and the per-channel statistics, independent of the batch size.
  const std::vector<SavedSpec> saved = layer->SavedPerSample();
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved[0].ref, SavedRef::kInput);
  EXPECT_EQ(saved[1].ref, SavedRef::kNew);
  EXPECT_EQ(saved[1].bytes_per_sample, 0);
  EXPECT_EQ(saved[1].bytes_per_call, 3 * 5 * 4);
  EXPECT_TRUE(layer->SplitsBackward());
  EXPECT_GT(layer->ForwardFlopsPerSample(), 0.0);

  std::unique_ptr<Layer> plain = MakeLayer("name: 'bn' batch_norm1d { affine: false }", Shape{7});
  EXPECT_EQ(plain->type(), "batch_norm1d");
  EXPECT_TRUE(plain->parameter_specs().empty());
  EXPECT_EQ(plain->buffer_specs().size(), 2u);
  EXPECT_FALSE(plain->SplitsBackward());
}

TEST(BatchNormTest, RejectsBadConfigurationNamingTheField) {
  const struct {
    std::string text;
    Shape input;
    std::string message;
  } cases[] = {
      {"name: 'a' batch_norm1d { eps: 0 }", Shape{3},
       "batch_norm1d.eps must be a finite number > 0"},
      {"name: 'a' batch_norm2d { eps: -1 }", Shape{3, 2, 2},
       "batch_norm2d.eps must be a finite number > 0"},
      {"name: 'a' batch_norm1d { eps: nan }", Shape{3}, "batch_norm1d.eps"},
      {"name: 'a' batch_norm1d { eps: inf }", Shape{3}, "batch_norm1d.eps"},
      {"name: 'a' batch_norm1d { momentum: 0 }", Shape{3},
       "batch_norm1d.momentum must be in (0, 1]"},
      {"name: 'a' batch_norm1d { momentum: -0.1 }", Shape{3}, "batch_norm1d.momentum"},
      {"name: 'a' batch_norm2d { momentum: 1.5 }", Shape{3, 2, 2},
       "batch_norm2d.momentum must be in (0, 1], got 1.5"},
      {"name: 'a' batch_norm1d { momentum: nan }", Shape{3}, "batch_norm1d.momentum"},
      {"name: 'a' batch_norm1d {}", Shape{}, "[channels] or [channels, length]"},
      {"name: 'a' batch_norm1d {}", Shape{3, 4, 4}, "use batch_norm2d for [C, H, W]"},
      {"name: 'a' batch_norm2d {}", Shape{3}, "[channels, height, width]"},
      {"name: 'a' batch_norm2d {}", Shape{3, 4}, "use batch_norm1d for [C] or [C, L]"},
      {"name: 'a' batch_norm2d {}", Shape{2, 3, 4, 4}, "[channels, height, width]"},
      {"name: 'a' batch_norm1d {}", Shape{0}, "batch_norm1d"},
      {"name: 'a' batch_norm2d {}", Shape{0, 2, 2}, "batch_norm2d"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text + " on " + c.input.ToString());
    const absl::Status status =
        LayerRegistry::WithBuiltins().Create(ParseLayer(c.text), c.input).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
  }
}

TEST(BatchNormTest, TrainingOnOneValuePerChannelIsRejected) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'bn7' batch_norm1d {}", Shape{3});
  const std::vector<Tensor> params = UniformParams(*layer, device, 3);
  std::vector<Tensor> buffers = InitialBuffers(*layer, device);
  const LayerContext ctx{.device = device, .buffers = buffers};
  SavedTensors saved;
  absl::StatusOr<Tensor> y =
      layer->Forward(ctx, params, UniformTensor(device, Shape{1, 3}, 4, -1, 1), saved);
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(y.status().message()), HasSubstr("'bn7'"));
  EXPECT_THAT(std::string(y.status().message()), HasSubstr("one value per channel"));
  EXPECT_THAT(std::string(y.status().message()), HasSubstr("micro-batches of 2 or more"));
  EXPECT_TRUE(saved.tensors.empty());
  // Nothing was folded into the running statistics.
  EXPECT_THAT(Values(buffers[0]), ::testing::Each(0.0f));
  EXPECT_THAT(Values(buffers[1]), ::testing::Each(1.0f));
  // With positions, one sample already gives several values per channel.
  std::unique_ptr<Layer> with_length = MakeLayer("name: 'bn7' batch_norm1d {}", Shape{3, 2});
  EXPECT_TRUE(
      with_length->Forward(ctx, params, UniformTensor(device, Shape{1, 3, 2}, 4, -1, 1), saved)
          .ok());
}

TEST(BatchNormTest, RejectsMissingBuffersAndInputOfTheWrongShape) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'bn7' batch_norm2d {}", Shape{2, 3, 3});
  const std::vector<Tensor> params = UniformParams(*layer, device, 3);
  const Tensor x = UniformTensor(device, Shape{2, 2, 3, 3}, 4, -1, 1);
  for (bool training : {true, false}) {
    SCOPED_TRACE(training);
    const LayerContext ctx{.device = device, .training = training};
    SavedTensors saved;
    absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
    ASSERT_FALSE(y.ok());
    EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(y.status().message()), HasSubstr("'bn7'"));
    EXPECT_THAT(std::string(y.status().message()), HasSubstr("running_mean and running_var"));
  }
  // Buffers of another layer's size are refused, not written out of bounds.
  std::vector<Tensor> wrong =
      InitialBuffers(*MakeLayer("name: 'bn' batch_norm1d {}", Shape{3}), device);
  for (bool training : {true, false}) {
    SCOPED_TRACE(training);
    const LayerContext ctx{.device = device, .training = training, .buffers = wrong};
    SavedTensors saved;
    absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
    ASSERT_FALSE(y.ok());
    EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(y.status().message()), HasSubstr("buffers of f32[2], got f32[3]"));
    EXPECT_THAT(Values(wrong[0]), ::testing::Each(0.0f));
  }
  std::vector<Tensor> buffers = InitialBuffers(*layer, device);
  const LayerContext ctx{.device = device, .buffers = buffers};
  SavedTensors saved;
  absl::StatusOr<Tensor> bad =
      layer->Forward(ctx, params, UniformTensor(device, Shape{2, 3, 3, 3}, 4, -1, 1), saved);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("[2, 3, 3]"));
  ASSERT_TRUE(layer->Forward(ctx, params, x, saved).ok());
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  EXPECT_EQ(
      layer->Backward(ctx, params, grads, saved, UniformTensor(device, Shape{1, 2, 3, 3}, 5, -1, 1))
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpipe::testing
