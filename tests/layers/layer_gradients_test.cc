// Finite-difference checks of every built-in layer's Backward (dx and every parameter
// gradient) and of both losses' gradients with respect to the output.
#include <memory>
#include <ostream>
#include <string>

#include "gtest/gtest.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/gradient_check.h"
#include "tests/layers/make_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

struct Case {
  std::string name;   // test suffix
  std::string spec;   // plan entry
  Shape input_shape;  // per sample
  int64_t batch = 3;
  float min_abs_input = 0.0f;  // keep inputs away from a kink
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class LayerGradientTest : public ::testing::TestWithParam<Case> {};

TEST_P(LayerGradientTest, AnalyticGradientsMatchCentralDifferences) {
  const Case& c = GetParam();
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(c.spec, c.input_shape);
  const std::vector<Tensor> params = UniformParams(*layer, device, 11);
  const Tensor x =
      UniformTensor(device, c.input_shape.WithBatch(c.batch), 12, -2.0f, 2.0f, c.min_abs_input);
  LayerContext ctx{.device = device,
                   .training = true,
                   .seed = 99,
                   .step = 4,
                   .micro_batch = 2,
                   .layer_index = 5};
  absl::StatusOr<GradientCheckReport> report = CheckLayerGradients(*layer, ctx, params, x);
  ASSERT_TRUE(report.ok()) << report.status();
  const int64_t param_elements = [&] {
    int64_t n = 0;
    for (const Tensor& p : params) n += p.num_elements();
    return n;
  }();
  EXPECT_EQ(report->checked, x.num_elements() + param_elements);
  EXPECT_TRUE(report->ok()) << report->ToString();
  RecordProperty("max_error", std::to_string(report->max_error));
}

TEST_P(LayerGradientTest, ParameterGradientsAreRightWithoutInputGradient) {
  const Case& c = GetParam();
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(c.spec, c.input_shape);
  const std::vector<Tensor> params = UniformParams(*layer, device, 21);
  const Tensor x =
      UniformTensor(device, c.input_shape.WithBatch(c.batch), 22, -2.0f, 2.0f, c.min_abs_input);
  LayerContext ctx{.device = device, .need_input_grad = false};
  absl::StatusOr<GradientCheckReport> report = CheckLayerGradients(*layer, ctx, params, x);
  ASSERT_TRUE(report.ok()) << report.status();
  if (params.empty()) {
    EXPECT_EQ(report->checked, 0);
  } else {
    EXPECT_TRUE(report->ok()) << report->ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryLayer, LayerGradientTest,
    ::testing::Values(
        Case{"LinearWithBias", "name: 'fc' linear { out_features: 3 }", Shape{4}},
        Case{"LinearWithoutBias", "name: 'fc' linear { out_features: 3 bias: false }", Shape{4}},
        Case{"LinearOnRank2Samples", "name: 'fc' linear { out_features: 2 }", Shape{3, 4}, 2},
        Case{"LinearOnRank2SamplesWithoutBias", "name: 'fc' linear { out_features: 2 bias: false }",
             Shape{3, 4}, 2},
        Case{"LayerNormAffine", "name: 'ln' layer_norm {}", Shape{5}},
        Case{"LayerNormAffineOnRank2Samples", "name: 'ln' layer_norm {}", Shape{2, 6}, 2},
        Case{"LayerNormWithoutAffine", "name: 'ln' layer_norm { elementwise_affine: false }",
             Shape{5}},
        Case{"RmsNorm", "name: 'norm' rms_norm {}", Shape{5}},
        Case{"RmsNormOnRank2Samples", "name: 'norm' rms_norm { eps: 1e-5 }", Shape{2, 6}, 2},
        Case{"Gelu", "name: 'act' gelu {}", Shape{2, 4}},
        Case{"Tanh", "name: 'act' tanh {}", Shape{2, 4}},
        Case{"ReluAwayFromZero", "name: 'act' relu {}", Shape{2, 4}, 3, 0.1f},
        Case{"DropoutWithItsFixedMask", "name: 'drop' dropout { p: 0.4 }", Shape{2, 5}}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(LossGradientTest, SoftmaxCrossEntropyGradientMatchesCentralDifferences) {
  CpuDevice device;
  std::unique_ptr<Loss> loss = MakeLoss("softmax_cross_entropy {}");
  const Tensor output = UniformTensor(device, Shape{4, 5}, 31, -3.0f, 3.0f);
  const Tensor targets = I64Tensor(device, Shape{4}, {0, 4, 2, 2});
  absl::StatusOr<GradientCheckReport> report =
      CheckLossGradient(*loss, device, output, targets, /*global_batch=*/8);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->checked, 20);
  EXPECT_TRUE(report->ok()) << report->ToString();
}

TEST(LossGradientTest, MseGradientMatchesCentralDifferences) {
  CpuDevice device;
  std::unique_ptr<Loss> loss = MakeLoss("mse {}");
  const Tensor output = UniformTensor(device, Shape{3, 2, 3}, 32, -2.0f, 2.0f);
  const Tensor targets = UniformTensor(device, Shape{3, 2, 3}, 33, -2.0f, 2.0f);
  absl::StatusOr<GradientCheckReport> report =
      CheckLossGradient(*loss, device, output, targets, /*global_batch=*/6);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->checked, 18);
  EXPECT_TRUE(report->ok()) << report->ToString();
}

}  // namespace
}  // namespace gpipe::testing
