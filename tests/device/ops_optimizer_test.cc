// Conformance of OptimizerOps on every backend (see backends_under_test.h): PyTorch's
// single-tensor update rules, written out plainly in float as the oracle.
#include <cmath>
#include <vector>

#include "tests/device/backends_under_test.h"

namespace gpipe::testing {
namespace {

class OptimizerOpsTest : public OpsConformanceTest {};
GPIPE_INSTANTIATE_ON_EVERY_BACKEND(OptimizerOpsTest);

// A few float ulps: a backend may contract a multiply-add into an FMA (the CPU does not).
constexpr double kRelTol = 5e-7;
constexpr double kAbsTol = 1e-9;
constexpr int kN = 53;

std::vector<double> Widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

struct SgdCase {
  const char* name;
  SgdUpdate update;
};

TEST_P(OptimizerOpsTest, SgdFollowsTorchsRuleOverTwoSteps) {
  const SgdCase cases[] = {
      {"plain", {.neg_lr = -0.1f}},
      {"weight decay", {.neg_lr = -0.1f, .weight_decay = 0.01f}},
      {"momentum", {.neg_lr = -0.05f, .momentum = 0.9f, .one_minus_dampening = 0.8f}},
      {"nesterov", {.neg_lr = -0.05f, .weight_decay = 1e-3f, .momentum = 0.9f, .nesterov = true}},
  };
  for (const SgdCase& c : cases) {
    std::vector<float> p = TestValues(11, kN), buf(kN, 0.0f);
    const std::vector<float> g = TestValues(12, kN);
    Tensor tp = Upload(p, Shape{kN});
    const Tensor tg = Upload(g, Shape{kN});
    const bool momentum = c.update.momentum != 0;
    Tensor tbuf = momentum ? Zeros(Shape{kN}) : Tensor();
    for (int step = 0; step < 2; ++step) {
      SgdUpdate u = c.update;
      u.first_step = step == 0;
      ASSERT_TRUE(ops().optimizer.Sgd(u, tp, tg, tbuf).ok()) << c.name;
      for (int j = 0; j < kN; ++j) {
        float grad = g[j];
        if (u.weight_decay != 0) grad = grad + u.weight_decay * p[j];
        if (momentum) {
          buf[j] = u.first_step ? grad : buf[j] * u.momentum + u.one_minus_dampening * grad;
          grad = u.nesterov ? grad + u.momentum * buf[j] : buf[j];
        }
        p[j] = p[j] + u.neg_lr * grad;
      }
    }
    ExpectNear(Download(tp), Widen(p), kRelTol, kAbsTol, c.name);
    if (momentum) ExpectNear(Download(tbuf), Widen(buf), kRelTol, kAbsTol, c.name);
  }
}

TEST_P(OptimizerOpsTest, AdamAndAdamWFollowTorchsRuleOverThreeSteps) {
  for (const bool decoupled : {false, true}) {
    std::vector<float> p = TestValues(21, kN), m(kN, 0.0f), v(kN, 0.0f);
    const std::vector<float> g = TestValues(22, kN);
    Tensor tp = Upload(p, Shape{kN});
    const Tensor tg = Upload(g, Shape{kN});
    Tensor tm = Zeros(Shape{kN}), tv = Zeros(Shape{kN});
    const double lr = 1e-2, beta1 = 0.9, beta2 = 0.999, wd = 0.05;
    for (int t = 1; t <= 3; ++t) {
      const AdamUpdate u{
          .neg_step_size = static_cast<float>(-(lr / (1 - std::pow(beta1, t)))),
          .bias_correction2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(beta2, t))),
          .eps = 1e-8f,
          .lerp_weight = static_cast<float>(1 - beta1),
          .beta2 = static_cast<float>(beta2),
          .one_minus_beta2 = static_cast<float>(1 - beta2),
          .l2 = decoupled ? 0.0f : static_cast<float>(wd),
          .decoupled_scale = decoupled ? static_cast<float>(1 - lr * wd) : 1.0f};
      ASSERT_TRUE(ops().optimizer.Adam(u, tp, tg, tm, tv).ok());
      for (int j = 0; j < kN; ++j) {
        float grad = g[j];
        if (decoupled) {
          p[j] = p[j] * u.decoupled_scale;
        } else {
          grad = grad + u.l2 * p[j];
        }
        // torch.lerp: start + w (end - start) for |w| < 0.5.
        m[j] = m[j] + u.lerp_weight * (grad - m[j]);
        v[j] = v[j] * u.beta2 + u.one_minus_beta2 * grad * grad;
        const float denom = std::sqrt(v[j]) / u.bias_correction2_sqrt + u.eps;
        p[j] = p[j] + u.neg_step_size * m[j] / denom;
      }
    }
    const char* name = decoupled ? "adamw" : "adam";
    ExpectNear(Download(tp), Widen(p), kRelTol, kAbsTol, name);
    ExpectNear(Download(tm), Widen(m), kRelTol, kAbsTol, name);
    ExpectNear(Download(tv), Widen(v), kRelTol, kAbsTol, name);
  }
}

TEST_P(OptimizerOpsTest, MismatchedStateIsRejected) {
  Tensor p = Zeros(Shape{4});
  const Tensor g = Zeros(Shape{5});
  Tensor buf = Zeros(Shape{4});
  EXPECT_EQ(ops().optimizer.Sgd({.neg_lr = -1}, p, g, buf).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor m = Zeros(Shape{4}), v = Zeros(Shape{3});
  EXPECT_EQ(ops().optimizer.Adam({}, p, Zeros(Shape{4}), m, v).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpipe::testing
