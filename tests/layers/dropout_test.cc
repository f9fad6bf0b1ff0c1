// dropout: the mask is the documented Philox stream (values from
// tests/layers/oracles/layer_oracles.py), replays exactly for the same context, changes with
// every key field (seed, step, layer, position in the mini-batch), is the identity in evaluation,
// and keeps about 1-p scaled by 1/(1-p).
#include "layers/dropout.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/make_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

using ::testing::FloatEq;
using ::testing::HasSubstr;
using ::testing::Pointwise;

std::vector<float> Ones(int64_t n) { return std::vector<float>(n, 1.0f); }

// Forward of a dropout layer with probability p on `x` shaped [batch, features].
std::vector<float> DropoutForward(Device& device, double p, const LayerContext& ctx,
                                  const Shape& shape, const std::vector<float>& x) {
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'drop' dropout { p: " + std::to_string(p) + " }", shape.WithoutBatch());
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, {}, F32Tensor(device, shape, x), saved);
  EXPECT_TRUE(y.ok()) << y.status();
  return y.ok() ? Values(*y) : std::vector<float>{};
}

TEST(DropoutTest, MaskIsTheDocumentedPhiloxStream) {
  CpuDevice device;
  LayerContext ctx{.device = device,
                   .training = true,
                   .seed = 42,
                   .step = 3,
                   .micro_batch = 1,
                   .sample_offset = 1,
                   .layer_index = 2};
  EXPECT_THAT(DropoutForward(device, 0.5, ctx, Shape{2, 5}, Ones(10)),
              Pointwise(FloatEq(), {2.0f, 2.0f, 2.0f, 2.0f, 2.0f, 0.0f, 2.0f, 0.0f, 0.0f, 0.0f}));
  LayerContext other{.device = device, .training = true, .seed = 7};
  EXPECT_THAT(DropoutForward(device, 0.25, other, Shape{1, 8},
                             {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f}),
              Pointwise(FloatEq(), {1.33333333f, 2.66666667f, 4.0f, 5.33333333f, 0.0f, 8.0f,
                                    9.33333333f, 10.6666667f}));
}

TEST(DropoutTest, SameContextReproducesTheMaskExactly) {
  CpuDevice device;
  LayerContext ctx{.device = device, .seed = 5, .step = 11, .micro_batch = 3, .layer_index = 7};
  const std::vector<float> x = Values(UniformTensor(device, Shape{8, 64}, 1, -1.0f, 1.0f));
  EXPECT_EQ(DropoutForward(device, 0.3, ctx, Shape{8, 64}, x),
            DropoutForward(device, 0.3, ctx, Shape{8, 64}, x));
}

TEST(DropoutTest, MaskDependsOnlyOnContextAndElementIndexNotOnShape) {
  CpuDevice device;
  LayerContext ctx{.device = device, .seed = 5, .step = 1, .micro_batch = 2, .layer_index = 3};
  const std::vector<float> x = Ones(60);
  const std::vector<float> as_rows = DropoutForward(device, 0.5, ctx, Shape{4, 15}, x);
  const std::vector<float> as_one = DropoutForward(device, 0.5, ctx, Shape{1, 60}, x);
  EXPECT_EQ(as_rows, as_one);
  // A prefix of the micro-batch sees the same mask as the prefix of a larger one.
  const std::vector<float> prefix = DropoutForward(device, 0.5, ctx, Shape{2, 15}, Ones(30));
  EXPECT_EQ(prefix, std::vector<float>(as_rows.begin(), as_rows.begin() + 30));
}

TEST(DropoutTest, EveryKeyFieldChangesTheMask) {
  CpuDevice device;
  const LayerContext base{
      .device = device, .seed = 5, .step = 1, .micro_batch = 2, .layer_index = 3};
  const std::vector<float> x = Ones(256);
  const std::vector<float> reference = DropoutForward(device, 0.5, base, Shape{1, 256}, x);
  LayerContext other_seed = base;
  other_seed.seed = 6;
  LayerContext other_step = base;
  other_step.step = 2;
  LayerContext other_offset = base;
  other_offset.sample_offset = 3;
  LayerContext other_layer = base;
  other_layer.layer_index = 4;
  for (const LayerContext& ctx : {other_seed, other_step, other_offset, other_layer}) {
    const std::vector<float> y = DropoutForward(device, 0.5, ctx, Shape{1, 256}, x);
    int differing = 0;
    for (size_t i = 0; i < y.size(); ++i) differing += y[i] != reference[i];
    // Independent masks with p = 0.5 differ in about half the elements.
    EXPECT_GT(differing, 80);
  }
}

TEST(DropoutTest, MicroBatchMasksAreSlicesOfTheWholeBatchMask) {
  // Splitting a mini-batch of 6 samples into micro-batches of 2 draws exactly the mask the whole
  // mini-batch gets, whatever the micro-batch index is called.
  CpuDevice device;
  const LayerContext whole{.device = device, .seed = 4, .step = 9, .layer_index = 1};
  const std::vector<float> reference = DropoutForward(device, 0.5, whole, Shape{6, 7}, Ones(42));
  for (int m = 0; m < 3; ++m) {
    LayerContext part = whole;
    part.micro_batch = m;
    part.sample_offset = 2 * m;
    EXPECT_EQ(DropoutForward(device, 0.5, part, Shape{2, 7}, Ones(14)),
              std::vector<float>(reference.begin() + 14 * m, reference.begin() + 14 * (m + 1)));
  }
}

TEST(DropoutTest, EvaluationIsTheIdentityAndSharesTheInput) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'drop' dropout { p: 0.5 }", Shape{6});
  LayerContext ctx{.device = device, .training = false};
  const Tensor x = UniformTensor(device, Shape{3, 6}, 1, -1.0f, 1.0f);
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, {}, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_TRUE(y->SharesStorageWith(x));
  EXPECT_EQ(Values(*y), Values(x));
  EXPECT_TRUE(saved.tensors.empty());
  const Tensor dy = UniformTensor(device, Shape{3, 6}, 2, -1.0f, 1.0f);
  absl::StatusOr<Tensor> dx = layer->Backward(ctx, {}, {}, saved, dy);
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_EQ(Values(*dx), Values(dy));
}

TEST(DropoutTest, ZeroProbabilityIsTheIdentityInTraining) {
  CpuDevice device;
  LayerContext ctx{.device = device, .training = true, .seed = 1};
  const std::vector<float> x = Values(UniformTensor(device, Shape{4, 8}, 1, -1.0f, 1.0f));
  EXPECT_EQ(DropoutForward(device, 0.0, ctx, Shape{4, 8}, x), x);
}

TEST(DropoutTest, KeepsAboutOneMinusPScaledByItsInverse) {
  CpuDevice device;
  for (const double p : {0.1, 0.5, 0.9}) {
    SCOPED_TRACE(p);
    LayerContext ctx{.device = device, .seed = 3, .step = 2, .micro_batch = 1, .layer_index = 0};
    constexpr int64_t kElements = 200000;
    const std::vector<float> y = DropoutForward(device, p, ctx, Shape{100, 2000}, Ones(kElements));
    const float scale = static_cast<float>(1.0 / (1.0 - p));
    int64_t kept = 0;
    for (float v : y) {
      if (v != 0.0f) {
        ++kept;
        EXPECT_EQ(v, scale);
      }
    }
    // Standard deviation of the kept fraction is at most 0.0012 here.
    EXPECT_NEAR(static_cast<double>(kept) / kElements, 1.0 - p, 0.01);
  }
}

TEST(DropoutTest, BackwardAppliesTheForwardMask) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'drop' dropout { p: 0.5 }", Shape{32});
  LayerContext ctx{.device = device, .seed = 9, .step = 1, .micro_batch = 0, .layer_index = 1};
  SavedTensors saved;
  absl::StatusOr<Tensor> y =
      layer->Forward(ctx, {}, F32Tensor(device, Shape{2, 32}, Ones(64)), saved);
  ASSERT_TRUE(y.ok()) << y.status();
  // Backward of a micro-batch runs under the context of its forward, which keys the mask.
  const std::vector<float> dy = Values(UniformTensor(device, Shape{2, 32}, 4, 0.5f, 1.0f));
  absl::StatusOr<Tensor> dx =
      layer->Backward(ctx, {}, {}, saved, F32Tensor(device, Shape{2, 32}, dy));
  ASSERT_TRUE(dx.ok()) << dx.status();
  const std::vector<float> mask = Values(*y);
  const std::vector<float> grad = Values(*dx);
  for (size_t i = 0; i < grad.size(); ++i) EXPECT_FLOAT_EQ(grad[i], dy[i] * mask[i]) << i;
}

TEST(DropoutTest, BackwardRejectsAGradientOfAnotherSize) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'drop' dropout { p: 0.5 }", Shape{4});
  LayerContext ctx{.device = device};
  SavedTensors saved;
  ASSERT_TRUE(layer->Forward(ctx, {}, F32Tensor(device, Shape{2, 4}, Ones(8)), saved).ok());
  absl::StatusOr<Tensor> dx =
      layer->Backward(ctx, {}, {}, saved, F32Tensor(device, Shape{3, 4}, Ones(12)));
  ASSERT_FALSE(dx.ok());
  EXPECT_EQ(dx.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DropoutTest, RejectsProbabilityOutsideZeroToOne) {
  for (const char* p : {"1", "1.5", "-0.1", "nan"}) {
    SCOPED_TRACE(p);
    absl::StatusOr<std::unique_ptr<Layer>> layer = LayerRegistry::WithBuiltins().Create(
        ParseLayer(std::string("name: 'drop' dropout { p: ") + p + " }"), Shape{4});
    ASSERT_FALSE(layer.ok());
    EXPECT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(layer.status().message()), HasSubstr("dropout.p must be in [0, 1)"));
  }
  absl::StatusOr<std::unique_ptr<Layer>> layer =
      LayerRegistry::WithBuiltins().Create(ParseLayer("name: 'drop' dropout { p: 1.5 }"), Shape{4});
  EXPECT_EQ(layer.status().message(), "dropout.p must be in [0, 1), got 1.5");
}

}  // namespace
}  // namespace gpipe::testing
