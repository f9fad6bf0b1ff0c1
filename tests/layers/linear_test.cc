// Linear against independently computed values (tests/layers/oracles/layer_oracles.py), and its
// configuration and shape rules.
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/make_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

using ::testing::FloatNear;
using ::testing::Pointwise;

TEST(LinearTest, ForwardAndBackwardMatchIndependentValues) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'fc' linear { out_features: 2 }", Shape{3});
  const std::vector<Tensor> params = {
      F32Tensor(device, Shape{2, 3}, {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f}),
      F32Tensor(device, Shape{2}, {0.01f, -0.02f})};
  const Tensor x = F32Tensor(device, Shape{2, 3}, {1.0f, 2.0f, 3.0f, -1.0f, 0.5f, 2.0f});
  LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 2}));
  EXPECT_THAT(Values(*y), Pointwise(FloatNear(1e-6), {0.61f, -0.42f, 0.41f, -1.37f}));

  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  const Tensor dy = F32Tensor(device, Shape{2, 2}, {1.0f, -1.0f, 0.5f, 2.0f});
  absl::StatusOr<Tensor> dx = layer->Backward(ctx, params, grads, saved, dy);
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_THAT(Values(*dx), Pointwise(FloatNear(1e-6), {-0.3f, -0.7f, 0.9f, 0.85f, 0.9f, -1.05f}));
  EXPECT_THAT(Values(grads[0]),
              Pointwise(FloatNear(1e-6), {0.5f, 2.25f, 4.0f, -3.0f, -1.0f, 1.0f}));
  EXPECT_THAT(Values(grads[1]), Pointwise(FloatNear(1e-6), {1.5f, 1.0f}));
}

TEST(LinearTest, BackwardAccumulatesAcrossMicroBatches) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'fc' linear { out_features: 2 }", Shape{3});
  const std::vector<Tensor> params = UniformParams(*layer, device, 3);
  const Tensor x = UniformTensor(device, Shape{4, 3}, 4, -1.0f, 1.0f);
  const Tensor dy = UniformTensor(device, Shape{4, 2}, 5, -1.0f, 1.0f);
  LayerContext ctx{.device = device, .need_input_grad = false};
  std::vector<Tensor> once = ZeroGrads(*layer, device);
  std::vector<Tensor> twice = ZeroGrads(*layer, device);
  SavedTensors saved;
  ASSERT_TRUE(layer->Forward(ctx, params, x, saved).ok());
  ASSERT_TRUE(layer->Backward(ctx, params, once, saved, dy).ok());
  ASSERT_TRUE(layer->Backward(ctx, params, twice, saved, dy).ok());
  ASSERT_TRUE(layer->Backward(ctx, params, twice, saved, dy).ok());
  for (size_t p = 0; p < once.size(); ++p) {
    std::vector<float> doubled = Values(once[p]);
    for (float& v : doubled) v *= 2.0f;
    EXPECT_THAT(Values(twice[p]), Pointwise(FloatNear(1e-6), doubled));
  }
}

TEST(LinearTest, WithoutInputGradientReturnsAnUndefinedTensor) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'fc' linear { out_features: 2 }", Shape{3});
  const std::vector<Tensor> params = UniformParams(*layer, device, 3);
  const Tensor x = UniformTensor(device, Shape{1, 3}, 4, -1.0f, 1.0f);
  LayerContext ctx{.device = device, .need_input_grad = false};
  SavedTensors saved;
  ASSERT_TRUE(layer->Forward(ctx, params, x, saved).ok());
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  absl::StatusOr<Tensor> dx =
      layer->Backward(ctx, params, grads, saved, UniformTensor(device, Shape{1, 2}, 5, -1, 1));
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_FALSE(dx->defined());
}

TEST(LinearTest, AppliesOverTheLastDimensionOfRank2Samples) {
  CpuDevice device;
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'fc' linear { out_features: 2 bias: false }", Shape{2, 3});
  EXPECT_EQ(layer->output_shape(), (Shape{2, 2}));
  const std::vector<Tensor> params = {
      F32Tensor(device, Shape{2, 3}, {1.0f, 0.0f, 0.0f, 1.0f, 1.0f, 1.0f})};
  const Tensor x = F32Tensor(device, Shape{1, 2, 3}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f});
  LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{1, 2, 2}));
  EXPECT_THAT(Values(*y), Pointwise(FloatNear(0.0f), {1.0f, 6.0f, 4.0f, 15.0f}));
}

TEST(LinearTest, ParametersFollowPytorchLayoutAndInit) {
  std::unique_ptr<Layer> layer = MakeLayer("name: 'fc' linear { out_features: 5 }", Shape{16});
  const std::vector<ParamSpec> specs = layer->parameter_specs();
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].name, "weight");
  EXPECT_EQ(specs[0].shape, (Shape{5, 16}));
  EXPECT_EQ(specs[0].init, ParamInit::kUniform);
  EXPECT_DOUBLE_EQ(specs[0].bound, 0.25);
  EXPECT_EQ(specs[1].name, "bias");
  EXPECT_EQ(specs[1].shape, (Shape{5}));
  EXPECT_DOUBLE_EQ(specs[1].bound, 0.25);
  EXPECT_DOUBLE_EQ(layer->ForwardFlopsPerSample(), 2.0 * 16 * 5);
}

TEST(LinearTest, RejectsMissingOutFeatures) {
  absl::StatusOr<std::unique_ptr<Layer>> layer =
      LayerRegistry::WithBuiltins().Create(ParseLayer("name: 'fc' linear {}"), Shape{4});
  ASSERT_FALSE(layer.ok());
  EXPECT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(layer.status().message()), ::testing::HasSubstr("out_features"));
}

TEST(LinearTest, RejectsInputAndGradientOfTheWrongWidth) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'fc' linear { out_features: 2 }", Shape{3});
  const std::vector<Tensor> params = UniformParams(*layer, device, 3);
  LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> bad =
      layer->Forward(ctx, params, UniformTensor(device, Shape{2, 4}, 4, -1, 1), saved);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("'fc'"));
  ASSERT_TRUE(
      layer->Forward(ctx, params, UniformTensor(device, Shape{2, 3}, 4, -1, 1), saved).ok());
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  EXPECT_EQ(layer->Backward(ctx, params, grads, saved, UniformTensor(device, Shape{2, 3}, 5, -1, 1))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpipe::testing
