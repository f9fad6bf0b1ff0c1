// The embedding example's custom layer (examples/embed/scaled_tanh.h) against finite differences
// and against values computed here independently, and its registration through Extensions.
#include "examples/embed/scaled_tanh.h"

#include <cmath>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gpipe/extensions.h"
#include "gtest/gtest.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/gradient_check.h"
#include "tests/layers/test_tensors.h"

namespace gpipe {
namespace {

using ::testing::HasSubstr;
using namespace ::gpipe::testing;  // NOLINT: the layer-test helpers

pb::Layer Spec(double scale) {
  pb::Layer spec;
  spec.set_name("act");
  spec.mutable_custom()->set_type("scaled_tanh");
  (*spec.mutable_custom()->mutable_numbers())["scale"] = scale;
  return spec;
}

TEST(ScaledTanhTest, ForwardMatchesTheFormula) {
  CpuDevice device;
  const pb::Layer spec = Spec(1.5);
  const Shape input{3};
  auto layer = gpipe_example::ScaledTanh::Create(LayerArgs(spec, input));
  ASSERT_TRUE(layer.ok()) << layer.status();
  const Tensor x = F32Tensor(device, Shape{2, 3}, {-1.0f, 0.0f, 0.5f, 2.0f, -0.25f, 3.0f});
  const Tensor w = F32Tensor(device, Shape{3}, {1.0f, -2.0f, 0.5f});
  SavedTensors saved;
  LayerContext ctx{.device = device};
  auto y = (*layer)->Forward(ctx, {&w, 1}, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  const std::vector<float> xs = Values(x);
  const std::vector<float> ys = Values(*y);
  const double ws[] = {1.0, -2.0, 0.5};
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(ys[i], 1.5 * ws[i % 3] * std::tanh(static_cast<double>(xs[i])), 1e-6) << i;
  }
}

TEST(ScaledTanhTest, GradientsMatchFiniteDifferences) {
  CpuDevice device;
  const pb::Layer spec = Spec(0.75);
  const Shape input{2, 5};
  auto layer = gpipe_example::ScaledTanh::Create(LayerArgs(spec, input));
  ASSERT_TRUE(layer.ok()) << layer.status();
  const Tensor x = UniformTensor(device, Shape{3, 2, 5}, 7, -2.0f, 2.0f);
  const std::vector<Tensor> params = UniformParams(**layer, device, 11, -1.5f, 1.5f);
  LayerContext ctx{.device = device};
  auto report = CheckLayerGradients(**layer, ctx, params, x);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->ToString();
}

TEST(ScaledTanhTest, RejectsANonFiniteScale) {
  const pb::Layer spec = Spec(std::nan(""));
  const Shape input{4};
  auto layer = gpipe_example::ScaledTanh::Create(LayerArgs(spec, input));
  EXPECT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ExtensionsTest, RegistrationErrorsAreClear) {
  Extensions extensions;
  EXPECT_THAT(extensions.AddLayer({.type = "x"}).message(), HasSubstr("has no CPU factory"));
  EXPECT_THAT(extensions.AddLayer({.cpu = gpipe_example::ScaledTanh::Create}).message(),
              HasSubstr("needs a name"));
  ASSERT_TRUE(extensions.AddLayer({.type = "st", .cpu = gpipe_example::ScaledTanh::Create}).ok());
  EXPECT_EQ(extensions.AddLayer({.type = "st", .cpu = gpipe_example::ScaledTanh::Create}).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(extensions.AddDataSource("d", nullptr).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ExtensionsTest, CustomLayersResolvePerDevice) {
  Extensions extensions;
  ASSERT_TRUE(
      extensions.AddLayer({.type = "scaled_tanh", .cpu = gpipe_example::ScaledTanh::Create}).ok());
  const pb::Layer spec = Spec(1.0);
  EXPECT_TRUE(extensions.layers().Create(spec, Shape{4}).ok());
  const auto on_gpu = extensions.layers().ForDevice(pb::CUDA).Create(spec, Shape{4});
  EXPECT_EQ(on_gpu.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(on_gpu.status().message(),
              HasSubstr("has kernels for CPU but not for runtime.device CUDA"));
  pb::Layer unknown = spec;
  unknown.mutable_custom()->set_type("nope");
  EXPECT_THAT(extensions.layers().Create(unknown, Shape{4}).status().message(),
              HasSubstr("'nope' is not registered by this program (it registers scaled_tanh)"));
}

}  // namespace
}  // namespace gpipe
