// The gradient checker itself: it passes a correct layer and catches each kind of wrong
// gradient (input gradient, parameter gradient, overwriting instead of accumulating).
#include "tests/layers/gradient_check.h"

#include <memory>

#include "gtest/gtest.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

enum class Bug { kNone, kInputGradTwiceTooBig, kWeightGradSignFlipped, kOverwritesGrads };

// y[r, i] = w[i] * x[r, i]^2: a small layer whose Backward can be made wrong on purpose.
class FakeSquareScale final : public Layer {
 public:
  FakeSquareScale(int64_t features, Bug bug)
      : Layer("fake", Shape{features}, Shape{features}), features_(features), bug_(bug) {}
  std::string_view type() const override { return "fake_square_scale"; }
  std::vector<ParamSpec> parameter_specs() const override {
    return {{"weight", Shape{features_}, ParamInit::kOnes, 0.0}};
  }
  double ForwardFlopsPerSample() const override { return 2.0 * features_; }
  std::vector<SavedSpec> SavedPerSample() const override { return {{SavedRef::kInput}}; }

  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override {
    ASSIGN_OR_RETURN(Tensor y,
                     Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
    const float* w = params[0].f32();
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      y.f32()[i] = w[i % features_] * x.f32()[i] * x.f32()[i];
    }
    saved.tensors.push_back(x);
    return y;
  }

  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override {
    const Tensor& x = saved.tensors[0];
    const float* w = params[0].f32();
    float* dw = grads[0].f32();
    if (bug_ == Bug::kOverwritesGrads) grads[0].SetZero();
    const float weight_sign = bug_ == Bug::kWeightGradSignFlipped ? -1.0f : 1.0f;
    const float input_scale = bug_ == Bug::kInputGradTwiceTooBig ? 4.0f : 2.0f;
    ASSIGN_OR_RETURN(Tensor dx,
                     Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      const float xi = x.f32()[i];
      dw[i % features_] += weight_sign * dy.f32()[i] * xi * xi;
      dx.f32()[i] = input_scale * w[i % features_] * xi * dy.f32()[i];
    }
    return dx;
  }

 private:
  int64_t features_;
  Bug bug_;
};

GradientCheckReport RunCheck(Bug bug) {
  CpuDevice device;
  FakeSquareScale layer(4, bug);
  const std::vector<Tensor> params = UniformParams(layer, device, 5, 0.5f, 1.5f);
  const Tensor x = UniformTensor(device, Shape{3, 4}, 6, -2.0f, 2.0f, 0.3f);
  LayerContext ctx{.device = device};
  absl::StatusOr<GradientCheckReport> report = CheckLayerGradients(layer, ctx, params, x);
  EXPECT_TRUE(report.ok()) << report.status();
  return report.ok() ? *report : GradientCheckReport{};
}

TEST(GradientCheckTest, PassesACorrectLayerAndChecksEveryElement) {
  const GradientCheckReport report = RunCheck(Bug::kNone);
  EXPECT_TRUE(report.ok()) << report.ToString();
  EXPECT_EQ(report.checked, 3 * 4 + 4);
}

TEST(GradientCheckTest, CatchesAWrongInputGradient) {
  const GradientCheckReport report = RunCheck(Bug::kInputGradTwiceTooBig);
  EXPECT_FALSE(report.ok());
  ASSERT_FALSE(report.mismatches.empty());
  for (const GradientMismatch& m : report.mismatches) EXPECT_EQ(m.where, "dx");
  EXPECT_NEAR(report.mismatches[0].analytic, 2.0 * report.mismatches[0].numeric,
              1e-2 * std::max(1.0, std::fabs(report.mismatches[0].numeric)));
}

TEST(GradientCheckTest, CatchesAWrongParameterGradient) {
  const GradientCheckReport report = RunCheck(Bug::kWeightGradSignFlipped);
  EXPECT_FALSE(report.ok());
  ASSERT_FALSE(report.mismatches.empty());
  for (const GradientMismatch& m : report.mismatches) EXPECT_EQ(m.where, "param weight");
}

TEST(GradientCheckTest, CatchesABackwardThatOverwritesInsteadOfAccumulating) {
  const GradientCheckReport report = RunCheck(Bug::kOverwritesGrads);
  EXPECT_FALSE(report.ok());
  EXPECT_EQ(report.mismatches.size(), 4u) << report.ToString();
}

TEST(GradientCheckTest, LeavesTheCallersTensorsUnchanged) {
  CpuDevice device;
  FakeSquareScale layer(4, Bug::kNone);
  const std::vector<Tensor> params = UniformParams(layer, device, 5);
  const Tensor x = UniformTensor(device, Shape{2, 4}, 6, -2.0f, 2.0f);
  const std::vector<float> x_before = Values(x);
  const std::vector<float> w_before = Values(params[0]);
  LayerContext ctx{.device = device};
  ASSERT_TRUE(CheckLayerGradients(layer, ctx, params, x).ok());
  EXPECT_EQ(Values(x), x_before);
  EXPECT_EQ(Values(params[0]), w_before);
}

}  // namespace
}  // namespace gpipe::testing
