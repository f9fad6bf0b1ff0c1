// InitializeParameter: the documented Philox stream (values from
// tests/layers/oracles/layer_oracles.py), determinism, bounds, moments, and independence of
// layers and parameters.
#include "layers/parameter_init.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

using ::testing::Each;
using ::testing::Eq;
using ::testing::FloatEq;
using ::testing::HasSubstr;
using ::testing::Pointwise;

std::vector<float> Initialized(const ParamSpec& spec, uint64_t seed, int layer, int param) {
  CpuDevice device;
  Tensor value = *Tensor::Empty(device, spec.shape, DType::kF32, MemoryKind::kParameter);
  const absl::Status status = InitializeParameter(device, spec, seed, layer, param, value);
  EXPECT_TRUE(status.ok()) << status;
  return Values(value);
}

const ParamSpec kUniform{"weight", Shape{100, 50}, ParamInit::kUniform, 0.5};

TEST(ParameterInitTest, UniformIsTheDocumentedPhiloxStream) {
  const ParamSpec spec{"weight", Shape{2, 3}, ParamInit::kUniform, 0.5};
  EXPECT_THAT(Initialized(spec, /*seed=*/7, /*layer=*/1, /*param=*/0),
              Pointwise(FloatEq(), {-0.468712628f, -0.228269398f, 0.463199258f, 0.109048963f,
                                    0.0538048148f, 0.292274058f}));
}

TEST(ParameterInitTest, ZerosAndOnes) {
  EXPECT_THAT(Initialized({"bias", Shape{7}, ParamInit::kZeros, 0.0}, 1, 0, 1), Each(Eq(0.0f)));
  EXPECT_THAT(Initialized({"weight", Shape{7}, ParamInit::kOnes, 0.0}, 1, 0, 0), Each(Eq(1.0f)));
}

TEST(ParameterInitTest, IsDeterministic) {
  EXPECT_EQ(Initialized(kUniform, 42, 3, 0), Initialized(kUniform, 42, 3, 0));
}

TEST(ParameterInitTest, RespectsTheBoundWithPlausibleMoments) {
  const std::vector<float> values = Initialized(kUniform, 42, 3, 0);
  double sum = 0.0, squares = 0.0;
  for (float v : values) {
    EXPECT_GE(v, -0.5f);
    EXPECT_LE(v, 0.5f);
    sum += v;
    squares += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(values.size());
  const double mean = sum / n;
  const double variance = squares / n - mean * mean;
  // U(-b, b): mean 0 (standard error 0.0041 here), variance b^2 / 3 = 0.0833.
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(variance, 0.25 / 3.0, 0.005);
}

TEST(ParameterInitTest, DiffersAcrossSeedsLayersAndParameters) {
  const std::vector<float> reference = Initialized(kUniform, 42, 3, 0);
  EXPECT_NE(Initialized(kUniform, 43, 3, 0), reference);
  EXPECT_NE(Initialized(kUniform, 42, 4, 0), reference);
  EXPECT_NE(Initialized(kUniform, 42, 3, 1), reference);
}

// Element i is the i-th draw: a parameter's values do not depend on its shape, only on its key.
TEST(ParameterInitTest, ElementIIsTheIthDrawWhateverTheShape) {
  const std::vector<float> flat = Initialized({"w", Shape{12}, ParamInit::kUniform, 1.0}, 9, 2, 1);
  const std::vector<float> matrix =
      Initialized({"w", Shape{3, 4}, ParamInit::kUniform, 1.0}, 9, 2, 1);
  EXPECT_EQ(flat, matrix);
}

TEST(ParameterInitTest, RejectsATensorOfAnotherShape) {
  CpuDevice device;
  Tensor value = *Tensor::Empty(device, Shape{3}, DType::kF32, MemoryKind::kParameter);
  const absl::Status status = InitializeParameter(device, kUniform, 1, 0, 0, value);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("weight"));
}

}  // namespace
}  // namespace gpipe::testing
