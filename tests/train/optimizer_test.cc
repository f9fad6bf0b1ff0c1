// Optimizer trajectories against torch.optim (reference values in optimizer_reference.inc,
// produced by oracles/optimizer_reference.py), hyperparameter validation, and state handling.
#include "runtime/train/optimizer.h"

#include <array>
#include <cmath>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "proto/plan.pb.h"
#include "runtime/core/tensor.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/train/adam.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/train/sgd.h"

namespace gpipe {
namespace {

constexpr int kSteps = 4;
constexpr int kElements = 7;  // parameter 0 has 4 elements, parameter 1 has 3

struct ReferenceCase {
  const char* name;
  const char* spec;
  std::array<double, kSteps> lrs;
  std::array<std::array<float, kElements>, kSteps> expected;
};

// gtest prints the case name instead of the struct's bytes.
void PrintTo(const ReferenceCase& c, std::ostream* os) { *os << c.name << ": " << c.spec; }

const ReferenceCase kReferenceCases[] = {
#include "tests/train/optimizer_reference.inc"
};

// The same inputs as oracles/optimizer_reference.py.
const std::array<float, kElements> kInitial = {0.5f, -1.25f, 2.0f, 0.0f, -0.75f, 0.125f, 3.0f};
const std::array<std::array<float, kElements>, kSteps> kGrads = {{
    {0.1f, -0.2f, 0.3f, 0.05f, 1.5f, -0.5f, 0.0f},
    {-0.3f, 0.4f, 0.25f, -0.1f, 0.7f, 0.2f, -1.1f},
    {0.05f, -0.6f, -0.15f, 0.2f, -0.4f, 0.9f, 0.3f},
    {0.2f, 0.1f, -0.35f, -0.25f, 0.25f, -0.8f, 0.6f},
}};

pb::Optimizer ParseSpec(const std::string& text) {
  pb::Optimizer spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  return spec;
}

Tensor MakeTensor(CpuDevice& device, const Shape& shape, const float* values, MemoryKind kind) {
  Tensor t = *Tensor::Empty(device, shape, DType::kF32, kind);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = values[i];
  return t;
}

// Two parameters ([4] and [1, 3]) and their gradients.
struct Parameters {
  std::vector<Tensor> values;
  std::vector<Tensor> grads;
};

Parameters MakeParameters(CpuDevice& device) {
  Parameters p;
  p.values.push_back(MakeTensor(device, {4}, kInitial.data(), MemoryKind::kParameter));
  p.values.push_back(MakeTensor(device, {1, 3}, kInitial.data() + 4, MemoryKind::kParameter));
  p.grads.push_back(*Tensor::Zeros(device, {4}, DType::kF32, MemoryKind::kGradient));
  p.grads.push_back(*Tensor::Zeros(device, {1, 3}, DType::kF32, MemoryKind::kGradient));
  return p;
}

void SetGrads(Parameters& p, const std::array<float, kElements>& grads) {
  for (int i = 0; i < 4; ++i) p.grads[0].f32()[i] = grads[i];
  for (int i = 0; i < 3; ++i) p.grads[1].f32()[i] = grads[4 + i];
}

float Element(const Parameters& p, int k) {
  return k < 4 ? p.values[0].f32()[k] : p.values[1].f32()[k - 4];
}

class OptimizerMatchesTorchTest : public ::testing::TestWithParam<ReferenceCase> {};

TEST_P(OptimizerMatchesTorchTest, FourStepTrajectoryMatchesTorchOptim) {
  const ReferenceCase& c = GetParam();
  CpuDevice device;
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = CreateOptimizer(ParseSpec(c.spec));
  ASSERT_TRUE(optimizer.ok()) << optimizer.status();
  Parameters p = MakeParameters(device);
  for (int step = 0; step < kSteps; ++step) {
    SetGrads(p, kGrads[step]);
    ASSERT_TRUE((*optimizer)->Step(device, c.lrs[step], p.values, p.grads).ok());
    for (int k = 0; k < kElements; ++k) {
      const float expected = c.expected[step][k];
      // torch's vectorized kernels fuse some multiply-adds, so about one element in ten
      // differs from this loop in the last bit; anything larger is a bug.
      const float tolerance = 1e-6f * std::max(1.0f, std::fabs(expected));
      EXPECT_NEAR(Element(p, k), expected, tolerance)
          << c.name << " step " << step << " element " << k;
    }
  }
  EXPECT_EQ((*optimizer)->steps(), kSteps);
}

INSTANTIATE_TEST_SUITE_P(TorchReference, OptimizerMatchesTorchTest,
                         ::testing::ValuesIn(kReferenceCases),
                         [](const ::testing::TestParamInfo<ReferenceCase>& info) {
                           return std::string(info.param.name);
                         });

// An independent hand computation of the first steps, so a broken .inc cannot hide a bug.
TEST(SgdOptimizerTest, MomentumFirstStepUsesGradientThenAccumulates) {
  CpuDevice device;
  auto optimizer = CreateOptimizer(ParseSpec("sgd { lr: 0.5 momentum: 0.5 dampening: 0.5 }"));
  ASSERT_TRUE(optimizer.ok());
  const float initial = 1.0f;
  std::vector<Tensor> values = {MakeTensor(device, {1}, &initial, MemoryKind::kParameter)};
  const float g1 = 2.0f, g2 = 4.0f;
  std::vector<Tensor> grads = {MakeTensor(device, {1}, &g1, MemoryKind::kGradient)};
  ASSERT_TRUE((*optimizer)->Step(device, 0.5, values, grads).ok());
  // buf = 2 (no dampening on the first step); p = 1 - 0.5 * 2 = 0.
  EXPECT_FLOAT_EQ(values[0].f32()[0], 0.0f);
  grads[0].f32()[0] = g2;
  ASSERT_TRUE((*optimizer)->Step(device, 0.5, values, grads).ok());
  // buf = 0.5 * 2 + 0.5 * 4 = 3; p = 0 - 0.5 * 3 = -1.5.
  EXPECT_FLOAT_EQ(values[0].f32()[0], -1.5f);
}

TEST(AdamOptimizerTest, FirstStepMovesEachElementByLrTimesSignOfGradient) {
  // After one step m_hat = g and v_hat = g^2, so the update is lr * g / (|g| + eps).
  CpuDevice device;
  auto optimizer = CreateOptimizer(ParseSpec("adam { lr: 0.1 eps: 0 }"));
  ASSERT_TRUE(optimizer.ok());
  const float initial[3] = {1.0f, 1.0f, 1.0f};
  const float grad[3] = {3.0f, -0.001f, 250.0f};
  std::vector<Tensor> values = {MakeTensor(device, {3}, initial, MemoryKind::kParameter)};
  std::vector<Tensor> grads = {MakeTensor(device, {3}, grad, MemoryKind::kGradient)};
  ASSERT_TRUE((*optimizer)->Step(device, 0.1, values, grads).ok());
  EXPECT_NEAR(values[0].f32()[0], 0.9f, 1e-6);
  EXPECT_NEAR(values[0].f32()[1], 1.1f, 1e-6);
  EXPECT_NEAR(values[0].f32()[2], 0.9f, 1e-6);
}

TEST(AdamOptimizerTest, AdamWDecaysWeightsEvenWithZeroGradient) {
  CpuDevice device;
  auto optimizer = CreateOptimizer(ParseSpec("adamw { lr: 0.1 weight_decay: 0.5 }"));
  ASSERT_TRUE(optimizer.ok());
  const float initial = 2.0f, zero = 0.0f;
  std::vector<Tensor> values = {MakeTensor(device, {1}, &initial, MemoryKind::kParameter)};
  std::vector<Tensor> grads = {MakeTensor(device, {1}, &zero, MemoryKind::kGradient)};
  ASSERT_TRUE((*optimizer)->Step(device, 0.1, values, grads).ok());
  EXPECT_FLOAT_EQ(values[0].f32()[0], 2.0f * (1.0f - 0.1f * 0.5f));
}

// nanoGPT's grouping: a [2, 2] weight and a [1, 1, 1] kernel decay, a [2] bias does not; with a
// zero gradient the Adam part moves nothing, so only the decay is seen. The bias stays exactly as
// it was; without decay_only_matrices it decays as the others do.
TEST(AdamOptimizerTest, DecayOnlyMatricesSparesParametersOfRankBelowTwo) {
  const float weight[4] = {2.0f, -1.0f, 0.5f, 4.0f}, kernel[1] = {3.0f}, bias[2] = {1.5f, -2.0f};
  const float zeros[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (const bool only_matrices : {true, false}) {
    SCOPED_TRACE(only_matrices ? "decay_only_matrices" : "every parameter");
    CpuDevice device;
    auto optimizer = CreateOptimizer(ParseSpec(absl::StrCat(
        "adamw { lr: 0.1 weight_decay: 0.5 decay_only_matrices: ", only_matrices ? "true" : "false",
        " }")));
    ASSERT_TRUE(optimizer.ok()) << optimizer.status();
    std::vector<Tensor> values = {MakeTensor(device, {2, 2}, weight, MemoryKind::kParameter),
                                  MakeTensor(device, {1, 1, 1}, kernel, MemoryKind::kParameter),
                                  MakeTensor(device, {2}, bias, MemoryKind::kParameter)};
    std::vector<Tensor> grads = {MakeTensor(device, {2, 2}, zeros, MemoryKind::kGradient),
                                 MakeTensor(device, {1, 1, 1}, zeros, MemoryKind::kGradient),
                                 MakeTensor(device, {2}, zeros, MemoryKind::kGradient)};
    ASSERT_TRUE((*optimizer)->Step(device, 0.1, values, grads).ok());
    const float decay = static_cast<float>(1.0 - 0.1 * 0.5);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(values[0].f32()[i], weight[i] * decay) << i;
    EXPECT_EQ(values[1].f32()[0], kernel[0] * decay);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(values[2].f32()[i], only_matrices ? bias[i] : bias[i] * decay) << i;
    }
  }
}

TEST(OptimizerStateTest, StateIsAllocatedOnFirstStepAsOptimizerState) {
  struct Expectation {
    const char* spec;
    int64_t state_bytes;  // for 7 parameter elements
  };
  for (const Expectation& e :
       {Expectation{"sgd { lr: 0.1 }", 0}, Expectation{"sgd { lr: 0.1 momentum: 0.9 }", 7 * 4},
        Expectation{"adam { }", 2 * 7 * 4}, Expectation{"adamw { }", 2 * 7 * 4}}) {
    CpuDevice device;
    auto optimizer = CreateOptimizer(ParseSpec(e.spec));
    ASSERT_TRUE(optimizer.ok()) << e.spec;
    Parameters p = MakeParameters(device);
    SetGrads(p, kGrads[0]);
    EXPECT_EQ(device.memory().current(MemoryKind::kOptimizerState), 0) << e.spec;
    ASSERT_TRUE((*optimizer)->Step(device, 0.1, p.values, p.grads).ok());
    EXPECT_EQ(device.memory().current(MemoryKind::kOptimizerState), e.state_bytes) << e.spec;
    ASSERT_TRUE((*optimizer)->Step(device, 0.1, p.values, p.grads).ok());
    EXPECT_EQ(device.memory().current(MemoryKind::kOptimizerState), e.state_bytes) << e.spec;
    optimizer->reset();
    EXPECT_EQ(device.memory().current(MemoryKind::kOptimizerState), 0) << e.spec;
  }
}

TEST(OptimizerStateTest, GradientsAreNotModified) {
  CpuDevice device;
  auto optimizer = CreateOptimizer(ParseSpec("sgd { lr: 0.1 momentum: 0.9 weight_decay: 0.1 }"));
  ASSERT_TRUE(optimizer.ok());
  Parameters p = MakeParameters(device);
  SetGrads(p, kGrads[1]);
  ASSERT_TRUE((*optimizer)->Step(device, 0.1, p.values, p.grads).ok());
  ASSERT_TRUE((*optimizer)->Step(device, 0.1, p.values, p.grads).ok());
  for (int k = 0; k < 4; ++k) EXPECT_EQ(p.grads[0].f32()[k], kGrads[1][k]);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(p.grads[1].f32()[k], kGrads[1][4 + k]);
}

TEST(OptimizerStateTest, ReportsBaseLrAndCountsSteps) {
  auto sgd = CreateOptimizer(ParseSpec("sgd { lr: 0.25 }"));
  auto adam = CreateOptimizer(ParseSpec("adam { }"));
  auto adamw = CreateOptimizer(ParseSpec("adamw { lr: 0.003 }"));
  ASSERT_TRUE(sgd.ok() && adam.ok() && adamw.ok());
  EXPECT_EQ((*sgd)->base_lr(), 0.25);
  EXPECT_EQ((*adam)->base_lr(), 0.001);
  EXPECT_EQ((*adamw)->base_lr(), 0.003);
  EXPECT_EQ((*sgd)->steps(), 0);
}

TEST(OptimizerStepTest, RejectsMismatchedArgumentsWithoutChangingAnything) {
  CpuDevice device;
  auto optimizer = CreateOptimizer(ParseSpec("adam { }"));
  ASSERT_TRUE(optimizer.ok());
  Parameters p = MakeParameters(device);
  SetGrads(p, kGrads[0]);

  // One gradient for two parameters.
  absl::Status status =
      (*optimizer)->Step(device, 0.1, p.values, std::span<const Tensor>(p.grads).first(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("2 parameters but 1 gradients"), std::string::npos) << status;

  // Gradient of the wrong shape.
  std::vector<Tensor> wrong = {p.grads[0],
                               *Tensor::Zeros(device, {3}, DType::kF32, MemoryKind::kGradient)};
  status = (*optimizer)->Step(device, 0.1, p.values, wrong);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("parameter 1 is f32[1, 3] but its gradient is f32[3]"),
            std::string::npos)
      << status;

  // Negative or non-finite learning rate.
  status = (*optimizer)->Step(device, -0.1, p.values, p.grads);
  EXPECT_NE(status.message().find("learning rate must be finite and >= 0, got -0.1"),
            std::string::npos)
      << status;
  status = (*optimizer)->Step(device, std::nan(""), p.values, p.grads);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ((*optimizer)->steps(), 0);
  EXPECT_EQ(Element(p, 0), kInitial[0]);
  EXPECT_EQ(device.memory().current(MemoryKind::kOptimizerState), 0);

  // After the first step the parameter count is fixed.
  ASSERT_TRUE((*optimizer)->Step(device, 0.1, p.values, p.grads).ok());
  status = (*optimizer)
               ->Step(device, 0.1, std::span<Tensor>(p.values).first(1),
                      std::span<const Tensor>(p.grads).first(1));
  EXPECT_NE(status.message().find("pass the same parameters every step"), std::string::npos)
      << status;

  // Same count, other shapes: the state would be read out of bounds, so it is rejected.
  for (const char* spec : {"adam { }", "sgd { lr: 0.1 momentum: 0.9 }"}) {
    auto stateful = CreateOptimizer(ParseSpec(spec));
    ASSERT_TRUE(stateful.ok());
    ASSERT_TRUE((*stateful)->Step(device, 0.1, p.values, p.grads).ok());
    std::vector<Tensor> swapped_values = {p.values[1], p.values[0]};
    std::vector<Tensor> swapped_grads = {p.grads[1], p.grads[0]};
    status = (*stateful)->Step(device, 0.1, swapped_values, swapped_grads);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << spec;
    EXPECT_NE(status.message().find("its optimizer state was created for"), std::string::npos)
        << status;
  }
}

struct InvalidSpec {
  const char* spec;
  const char* message;
};

void PrintTo(const InvalidSpec& s, std::ostream* os) { *os << "'" << s.spec << "'"; }

class InvalidOptimizerTest : public ::testing::TestWithParam<InvalidSpec> {};

TEST_P(InvalidOptimizerTest, IsRejectedNamingTheField) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      CreateOptimizer(ParseSpec(GetParam().spec));
  ASSERT_FALSE(optimizer.ok()) << GetParam().spec;
  EXPECT_EQ(optimizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(optimizer.status().message().find(GetParam().message), std::string::npos)
      << optimizer.status();
}

INSTANTIATE_TEST_SUITE_P(
    Hyperparameters, InvalidOptimizerTest,
    ::testing::Values(
        InvalidSpec{"", "training.optimizer has no kind set"},
        InvalidSpec{"sgd { }", "optimizer.sgd.lr must be > 0, got 0"},
        InvalidSpec{"sgd { lr: 0 }", "optimizer.sgd.lr must be > 0, got 0"},
        InvalidSpec{"sgd { lr: -1 }", "optimizer.sgd.lr must be > 0, got -1"},
        InvalidSpec{"sgd { lr: inf }", "optimizer.sgd.lr must be > 0, got inf"},
        InvalidSpec{"sgd { lr: 0.1 momentum: -0.5 }",
                    "optimizer.sgd.momentum must be >= 0, got -0.5"},
        InvalidSpec{"sgd { lr: 0.1 dampening: -1 }",
                    "optimizer.sgd.dampening must be >= 0, got -1"},
        InvalidSpec{"sgd { lr: 0.1 weight_decay: -0.01 }",
                    "optimizer.sgd.weight_decay must be >= 0, got -0.01"},
        InvalidSpec{"sgd { lr: 0.1 nesterov: true }",
                    "optimizer.sgd.nesterov requires momentum > 0 and dampening = 0, got "
                    "momentum 0 and dampening 0"},
        InvalidSpec{"sgd { lr: 0.1 nesterov: true momentum: 0.9 dampening: 0.1 }",
                    "optimizer.sgd.nesterov requires momentum > 0 and dampening = 0, got "
                    "momentum 0.9 and dampening 0.1"},
        InvalidSpec{"adam { lr: 0 }", "optimizer.adam.lr must be > 0, got 0"},
        InvalidSpec{"adam { beta1: 1 }", "optimizer.adam.beta1 must be in [0, 1), got 1"},
        InvalidSpec{"adam { beta1: -0.1 }", "optimizer.adam.beta1 must be in [0, 1), got -0.1"},
        InvalidSpec{"adam { beta2: 1.5 }", "optimizer.adam.beta2 must be in [0, 1), got 1.5"},
        InvalidSpec{"adam { eps: -1e-8 }", "optimizer.adam.eps must be >= 0, got -1e-08"},
        InvalidSpec{"adam { weight_decay: -1 }",
                    "optimizer.adam.weight_decay must be >= 0, got -1"},
        InvalidSpec{"adamw { lr: -0.001 }", "optimizer.adamw.lr must be > 0, got -0.001"},
        InvalidSpec{"adamw { beta2: 1 }", "optimizer.adamw.beta2 must be in [0, 1), got 1"},
        InvalidSpec{"adamw { weight_decay: -0.01 }",
                    "optimizer.adamw.weight_decay must be >= 0, got -0.01"}));

}  // namespace
}  // namespace gpipe
