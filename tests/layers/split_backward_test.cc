// The zero-bubble split of Backward: for every layer that splits, BackwardInput (B) and
// BackwardWeight (W) together, in either order, give bit for bit what Backward gives; W
// accumulates; B without an input gradient returns an undefined tensor. Layers without
// parameters do not split: they have no halves at all (Layer::split_backward() is null).
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/make_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {


struct SplitCase {
  std::string name;   // test suffix
  std::string spec;   // plan entry
  Shape input_shape;  // per sample
  bool splits = true;
};

void PrintTo(const SplitCase& c, std::ostream* os) { *os << c.name; }

// Same shape, dtype and bytes: the comparison the split must pass.
void ExpectBitIdentical(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what;
  ASSERT_TRUE(expected.defined()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  EXPECT_EQ(std::memcmp(actual.raw_data(), expected.raw_data(), actual.bytes()), 0)
      << what << " differs from the combined Backward's";
}

// Gradients that start non-zero, so both paths must add rather than overwrite.
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
  for (const Tensor& t : tensors) {
    absl::StatusOr<Tensor> copy = t.Clone(MemoryKind::kGradient);
    EXPECT_TRUE(copy.ok()) << copy.status();
    copies.push_back(*std::move(copy));
  }
  return copies;
}

// The layer's buffers (batch norm's running statistics) as their specs initialize them.
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

// Everything one backward comparison needs: a layer, its parameters, one Forward's saved
// tensors and an output gradient, all from seeded random values.
struct Fixture {
  Fixture(const SplitCase& c, uint64_t seed, bool need_input_grad)
      : layer(MakeLayer(c.spec, c.input_shape)),
        buffers(InitialBuffers(*layer, device)),
        ctx{.device = device, .seed = 7, .need_input_grad = need_input_grad, .buffers = buffers},
        params(UniformParams(*layer, device, seed)),
        x(UniformTensor(device, c.input_shape.WithBatch(5), seed + 1, -2.0f, 2.0f)) {
    absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
    EXPECT_TRUE(y.ok()) << y.status();
    if (y.ok()) dy = UniformTensor(device, y->shape(), seed + 2, -1.0f, 1.0f);
  }

  CpuDevice device;
  std::unique_ptr<Layer> layer;
  std::vector<Tensor> buffers;
  LayerContext ctx;
  std::vector<Tensor> params;
  Tensor x;
  SavedTensors saved;
  Tensor dy;

  // The layer's halves: every case's layer has them, also one that reports no split (its W
  // does nothing).
  const SplitBackward& halves() const { return dynamic_cast<const SplitBackward&>(*layer); }
};

class SplitBackwardTest : public ::testing::TestWithParam<SplitCase> {};

TEST_P(SplitBackwardTest, ReportsWhetherItSplits) {
  const SplitCase& c = GetParam();
  std::unique_ptr<Layer> layer = MakeLayer(c.spec, c.input_shape);
  EXPECT_EQ(layer->SplitsBackward(), c.splits);
  // Only layers with parameters have a W to defer.
  EXPECT_EQ(layer->SplitsBackward(), !layer->parameter_specs().empty());
}

TEST_P(SplitBackwardTest, InputThenWeightIsBitIdenticalToBackward) {
  for (uint64_t seed : {11u, 12u, 13u}) {
    SCOPED_TRACE(seed);
    Fixture f(GetParam(), seed, /*need_input_grad=*/true);
    const std::vector<Tensor> start = StartingGrads(*f.layer, f.device, seed + 3);
    std::vector<Tensor> combined = Copies(start);
    absl::StatusOr<Tensor> dx = f.layer->Backward(f.ctx, f.params, combined, f.saved, f.dy);
    ASSERT_TRUE(dx.ok()) << dx.status();

    std::vector<Tensor> split = Copies(start);
    absl::StatusOr<Tensor> split_dx = f.halves().BackwardInput(f.ctx, f.params, f.saved, f.dy);
    ASSERT_TRUE(split_dx.ok()) << split_dx.status();
    ASSERT_TRUE(f.halves().BackwardWeight(f.ctx, split, f.saved, f.dy).ok());

    ExpectBitIdentical(*split_dx, *dx, "dx");
    for (size_t p = 0; p < split.size(); ++p) {
      ExpectBitIdentical(split[p], combined[p], "param " + std::to_string(p));
    }
  }
}

TEST_P(SplitBackwardTest, WeightThenInputIsBitIdenticalToBackward) {
  for (uint64_t seed : {21u, 22u, 23u}) {
    SCOPED_TRACE(seed);
    Fixture f(GetParam(), seed, /*need_input_grad=*/true);
    const std::vector<Tensor> start = StartingGrads(*f.layer, f.device, seed + 3);
    std::vector<Tensor> combined = Copies(start);
    absl::StatusOr<Tensor> dx = f.layer->Backward(f.ctx, f.params, combined, f.saved, f.dy);
    ASSERT_TRUE(dx.ok()) << dx.status();

    std::vector<Tensor> split = Copies(start);
    ASSERT_TRUE(f.halves().BackwardWeight(f.ctx, split, f.saved, f.dy).ok());
    absl::StatusOr<Tensor> split_dx = f.halves().BackwardInput(f.ctx, f.params, f.saved, f.dy);
    ASSERT_TRUE(split_dx.ok()) << split_dx.status();

    ExpectBitIdentical(*split_dx, *dx, "dx");
    for (size_t p = 0; p < split.size(); ++p) {
      ExpectBitIdentical(split[p], combined[p], "param " + std::to_string(p));
    }
  }
}

// W of micro-batch m+1 lands on top of W of micro-batch m, as Backward's would.
TEST_P(SplitBackwardTest, WeightAccumulatesLikeRepeatedBackward) {
  Fixture f(GetParam(), 31, /*need_input_grad=*/false);
  std::vector<Tensor> by_backward = ZeroGrads(*f.layer, f.device);
  std::vector<Tensor> once = ZeroGrads(*f.layer, f.device);
  std::vector<Tensor> twice = ZeroGrads(*f.layer, f.device);
  ASSERT_TRUE(f.halves().BackwardWeight(f.ctx, once, f.saved, f.dy).ok());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(f.halves().BackwardWeight(f.ctx, twice, f.saved, f.dy).ok());
    ASSERT_TRUE(f.layer->Backward(f.ctx, f.params, by_backward, f.saved, f.dy).ok());
  }
  for (size_t p = 0; p < once.size(); ++p) {
    SCOPED_TRACE(p);
    ExpectBitIdentical(twice[p], by_backward[p], "param after two calls");
    std::vector<float> doubled = Values(once[p]);
    for (float& v : doubled) v *= 2.0f;
    EXPECT_THAT(Values(twice[p]), ::testing::Pointwise(::testing::FloatNear(1e-5f), doubled));
    EXPECT_NE(Values(once[p]), std::vector<float>(doubled.size(), 0.0f)) << "W did nothing";
  }
}

TEST_P(SplitBackwardTest, InputWithoutInputGradientIsUndefinedAndWeightStillMatches) {
  Fixture f(GetParam(), 41, /*need_input_grad=*/false);
  absl::StatusOr<Tensor> dx = f.halves().BackwardInput(f.ctx, f.params, f.saved, f.dy);
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_FALSE(dx->defined());

  const std::vector<Tensor> start = StartingGrads(*f.layer, f.device, 44);
  std::vector<Tensor> combined = Copies(start);
  std::vector<Tensor> split = Copies(start);
  ASSERT_TRUE(f.layer->Backward(f.ctx, f.params, combined, f.saved, f.dy).ok());
  ASSERT_TRUE(f.halves().BackwardWeight(f.ctx, split, f.saved, f.dy).ok());
  for (size_t p = 0; p < split.size(); ++p) {
    ExpectBitIdentical(split[p], combined[p], "param " + std::to_string(p));
  }
}

TEST_P(SplitBackwardTest, HalvesRejectAGradientOfTheWrongShape) {
  Fixture f(GetParam(), 51, /*need_input_grad=*/true);
  const Tensor bad = UniformTensor(f.device, Shape{2, 1}, 52, -1.0f, 1.0f);
  std::vector<Tensor> grads = ZeroGrads(*f.layer, f.device);
  EXPECT_EQ(f.halves().BackwardInput(f.ctx, f.params, f.saved, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.halves().BackwardWeight(f.ctx, grads, f.saved, bad).code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(
    LayersWithBackwardHalves, SplitBackwardTest,
    ::testing::Values(
        SplitCase{"LinearWithBias", "name: 'fc' linear { out_features: 6 }", Shape{3, 8}},
        SplitCase{"LinearWithoutBias", "name: 'fc' linear { out_features: 6 bias: false }",
                  Shape{3, 8}},
        SplitCase{"LinearOnRank1Samples", "name: 'fc' linear { out_features: 7 }", Shape{9}},
        SplitCase{"LayerNormAffine", "name: 'ln' layer_norm {}", Shape{3, 8}},
        // No parameters, so no W to defer: it reports no split, but both halves still work
        // (W does nothing), which these cases pin.
        SplitCase{"LayerNormWithoutAffine", "name: 'ln' layer_norm { elementwise_affine: false }",
                  Shape{3, 8}, /*splits=*/false},
        SplitCase{"BatchNorm1dOnChannels", "name: 'bn' batch_norm1d {}", Shape{4}},
        SplitCase{"BatchNorm1dOnChannelsAndLength", "name: 'bn' batch_norm1d {}", Shape{3, 8}},
        SplitCase{"BatchNorm2d", "name: 'bn' batch_norm2d {}", Shape{3, 4, 4}},
        SplitCase{"BatchNorm2dWithoutAffine", "name: 'bn' batch_norm2d { affine: false }",
                  Shape{3, 4, 4}, /*splits=*/false}),
    [](const ::testing::TestParamInfo<SplitCase>& info) { return info.param.name; });

// A parameter-free layer's Backward is already B: it has no halves to call by mistake.
TEST(SplitBackwardTest, ParameterFreeLayersDoNotSplitAndHaveNoHalves) {
  for (const char* spec : {"name: 'act7' relu {}", "name: 'act7' gelu {}", "name: 'act7' tanh {}",
                           "name: 'act7' dropout { p: 0.3 }"}) {
    SCOPED_TRACE(spec);
    CpuDevice device;
    std::unique_ptr<Layer> layer = MakeLayer(spec, Shape{4});
    EXPECT_FALSE(layer->SplitsBackward());
    EXPECT_EQ(layer->split_backward(), nullptr);
    EXPECT_EQ(dynamic_cast<const SplitBackward*>(layer.get()), nullptr);
    const LayerContext ctx{.device = device};
    const Tensor x = UniformTensor(device, Shape{2, 4}, 61, -1.0f, 1.0f);
    SavedTensors saved;
    absl::StatusOr<Tensor> y = layer->Forward(ctx, {}, x, saved);
    ASSERT_TRUE(y.ok()) << y.status();
    absl::StatusOr<Tensor> dx = layer->Backward(ctx, {}, {}, saved, *y);
    ASSERT_TRUE(dx.ok()) << dx.status();
    EXPECT_EQ(dx->shape(), x.shape());
  }
}

}  // namespace
}  // namespace gpipe::testing
