// layer_norm against independently computed values (tests/layers/oracles/layer_oracles.py),
// its use of eps, its parameters, and its accuracy on inputs with a large common offset.
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
using ::testing::HasSubstr;
using ::testing::Pointwise;

TEST(LayerNormTest, ForwardAndBackwardMatchIndependentValues) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer("name: 'ln' layer_norm {}", Shape{4});
  const std::vector<Tensor> params = {F32Tensor(device, Shape{4}, {1.0f, 0.5f, -1.0f, 2.0f}),
                                      F32Tensor(device, Shape{4}, {0.0f, 0.1f, 0.2f, -0.3f})};
  const Tensor x =
      F32Tensor(device, Shape{2, 4}, {1.0f, 2.0f, 3.0f, 4.0f, -1.0f, 0.0f, 3.0f, 10.0f});
  LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(Values(*y),
              Pointwise(FloatNear(2e-6), {-1.34163542f, -0.123605903f, -0.247211807f, 2.38327084f,
                                          -0.929980859f, -0.248742822f, 0.2f, 2.95493301f}));
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  const Tensor dy =
      F32Tensor(device, Shape{2, 4}, {0.1f, -0.2f, 0.3f, 0.4f, 1.0f, -1.0f, 0.5f, 0.25f});
  absl::StatusOr<Tensor> dx = layer->Backward(ctx, params, grads, saved, dy);
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_THAT(Values(*dx), Pointwise(FloatNear(2e-6),
                                     {0.2325481f, -0.11627575f, -0.465099599f, 0.348827248f,
                                      0.216000615f, -0.135884033f, -0.145309509f, 0.0651929268f}));
  EXPECT_THAT(Values(grads[0]),
              Pointwise(FloatNear(2e-6), {-1.0641444f, 0.786928005f, 0.134163542f, 0.943520794f}));
  EXPECT_THAT(Values(grads[1]), Pointwise(FloatNear(2e-6), {1.1f, -1.2f, 0.8f, 0.65f}));
}

TEST(LayerNormTest, UsesTheEpsFromThePlan) {
  CpuDevice device;
  // mean 2, biased variance 1: y = (x - 2) / sqrt(1 + eps) with eps = 1.
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'ln' layer_norm { eps: 1 elementwise_affine: false }", Shape{2});
  LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> y =
      layer->Forward(ctx, {}, F32Tensor(device, Shape{1, 2}, {1.0f, 3.0f}), saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(Values(*y), Pointwise(FloatNear(1e-6), {-0.70710678f, 0.70710678f}));
}

TEST(LayerNormTest, StaysAccurateWithALargeCommonOffset) {
  CpuDevice device;
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'ln' layer_norm { elementwise_affine: false }", Shape{4});
  LayerContext ctx{.device = device};
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(
      ctx, {}, F32Tensor(device, Shape{1, 4}, {1000.5f, 1001.0f, 1001.5f, 1002.0f}), saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(Values(*y),
              Pointwise(FloatNear(1e-5), {-1.34161932f, -0.44720644f, 0.44720644f, 1.34161932f}));
}

TEST(LayerNormTest, AffineParametersAreWeightOnesAndBiasZeros) {
  std::unique_ptr<Layer> layer = MakeLayer("name: 'ln' layer_norm {}", Shape{3, 8});
  EXPECT_EQ(layer->output_shape(), (Shape{3, 8}));
  const std::vector<ParamSpec> specs = layer->parameter_specs();
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].name, "weight");
  EXPECT_EQ(specs[0].shape, (Shape{8}));
  EXPECT_EQ(specs[0].init, ParamInit::kOnes);
  EXPECT_EQ(specs[1].name, "bias");
  EXPECT_EQ(specs[1].shape, (Shape{8}));
  EXPECT_EQ(specs[1].init, ParamInit::kZeros);
}

TEST(LayerNormTest, WithoutAffineHasNoParameters) {
  std::unique_ptr<Layer> layer =
      MakeLayer("name: 'ln' layer_norm { elementwise_affine: false }", Shape{8});
  EXPECT_TRUE(layer->parameter_specs().empty());
}

TEST(LayerNormTest, RejectsNonPositiveEpsNamingTheField) {
  for (const char* text : {"name: 'ln' layer_norm { eps: 0 }", "name: 'ln' layer_norm { eps: -1 }",
                           "name: 'ln' layer_norm { eps: nan }"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<std::unique_ptr<Layer>> layer =
        LayerRegistry::WithBuiltins().Create(ParseLayer(text), Shape{4});
    ASSERT_FALSE(layer.ok());
    EXPECT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(layer.status().message()), HasSubstr("layer_norm.eps must be > 0"));
  }
}

}  // namespace
}  // namespace gpipe::testing
