// relu, tanh and gelu against independently computed values
// (tests/layers/oracles/layer_oracles.py), their edge cases, and what they keep for Backward.
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/make_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

using ::testing::FloatNear;
using ::testing::Pointwise;

const std::vector<float> kX = {-2.0f, -0.5f, 0.25f, 0.5f, 3.0f};
const std::vector<float> kDy = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};

struct Results {
  std::vector<float> y;
  std::vector<float> dx;
};

Results ForwardBackward(const std::string& spec, const std::vector<float>& x,
                        const std::vector<float>& dy) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(spec, Shape{static_cast<int64_t>(x.size())});
  LayerContext ctx{.device = device};
  const int64_t n = static_cast<int64_t>(x.size());
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, {}, F32Tensor(device, Shape{1, n}, x), saved);
  EXPECT_TRUE(y.ok()) << y.status();
  absl::StatusOr<Tensor> dx =
      layer->Backward(ctx, {}, {}, saved, F32Tensor(device, Shape{1, n}, dy));
  EXPECT_TRUE(dx.ok()) << dx.status();
  if (!y.ok() || !dx.ok()) return {};
  return {Values(*y), Values(*dx)};
}

TEST(ReluTest, MatchesIndependentValues) {
  const Results run = ForwardBackward("name: 'a' relu {}", kX, kDy);
  EXPECT_THAT(run.y, Pointwise(FloatNear(0.0f), {0.0f, 0.0f, 0.25f, 0.5f, 3.0f}));
  EXPECT_THAT(run.dx, Pointwise(FloatNear(0.0f), {0.0f, 0.0f, 3.0f, 4.0f, 5.0f}));
}

TEST(ReluTest, GradientAtZeroIsZeroAsInPytorch) {
  const Results run = ForwardBackward("name: 'a' relu {}", {0.0f, -0.0f}, {7.0f, 7.0f});
  EXPECT_THAT(run.y, Pointwise(FloatNear(0.0f), {0.0f, 0.0f}));
  EXPECT_THAT(run.dx, Pointwise(FloatNear(0.0f), {0.0f, 0.0f}));
}

TEST(TanhTest, MatchesIndependentValues) {
  const Results run = ForwardBackward("name: 'a' tanh {}", kX, kDy);
  EXPECT_THAT(run.y, Pointwise(FloatNear(1e-6), {-0.96402758f, -0.462117157f, 0.244918662f,
                                                 0.462117157f, 0.995054754f}));
  EXPECT_THAT(run.dx, Pointwise(FloatNear(2e-6), {0.0706508247f, 1.57289547f, 2.82004455f,
                                                  3.14579093f, 0.0493301857f}));
}

TEST(GeluTest, MatchesIndependentValuesOfTheExactErfForm) {
  const Results run = ForwardBackward("name: 'a' gelu {}", kX, kDy);
  EXPECT_THAT(run.y, Pointwise(FloatNear(1e-6), {-0.0455002639f, -0.154268769f, 0.149676581f,
                                                 0.345731231f, 2.99595031f}));
  EXPECT_THAT(run.dx, Pointwise(FloatNear(2e-6), {-0.0852318003f, 0.265009751f, 2.08612006f,
                                                  3.4699805f, 5.05972823f}));
}

TEST(GeluTest, TailsAreZeroAndIdentityWithFiniteGradients) {
  const Results run =
      ForwardBackward("name: 'a' gelu {}", {-10.0f, -6.0f, 6.0f, 10.0f}, {1.0f, 1.0f, 1.0f, 1.0f});
  EXPECT_THAT(run.y, Pointwise(FloatNear(1e-6), {0.0f, -5.91952587e-09f, 5.99999999f, 10.0f}));
  EXPECT_THAT(run.dx, Pointwise(FloatNear(1e-6), {0.0f, -3.55271368e-08f, 1.0f, 1.0f}));
}

// relu and tanh keep their output, gelu its input: either way a tensor that exists anyway, so
// an activation adds no memory beyond its output.
TEST(ElementwiseActivationTest, SavesOnlyATensorThatAlreadyExists) {
  for (const auto& [spec, saves_output] :
       std::vector<std::pair<std::string, bool>>{{"name: 'a' relu {}", true},
                                                 {"name: 'a' tanh {}", true},
                                                 {"name: 'a' gelu {}", false}}) {
    SCOPED_TRACE(spec);
    CpuDevice device;
    std::unique_ptr<Layer> layer = MakeLayer(spec, Shape{2, 3});
    EXPECT_EQ(layer->output_shape(), (Shape{2, 3}));
    EXPECT_TRUE(layer->parameter_specs().empty());
    const Tensor x = UniformTensor(device, Shape{4, 2, 3}, 1, -1.0f, 1.0f);
    LayerContext ctx{.device = device};
    SavedTensors saved;
    absl::StatusOr<Tensor> y = layer->Forward(ctx, {}, x, saved);
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(saved.tensors.size(), 1u);
    EXPECT_TRUE(saved.tensors[0].SharesStorageWith(saves_output ? *y : x));
  }
}

}  // namespace
}  // namespace gpipe::testing
