// Composites under bf16 storage (LayerContext::saved_activation_dtype, training.precision BF16):
// what they keep inside for backward is bf16 and is widened for the call that reads it. Where
// every reader takes the value as a product operand (rounded to bf16 there anyway) no bit of the
// gradients changes; where a reader takes it in f32 (a layer norm's or gelu's input, the fused
// attention's O in D = rowsum(dO * O)), or an activation passes a rounded gradient on (a bias
// gradient sums it), the gradients move by bf16 rounding only.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/make_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

struct Gradients {
  std::vector<float> dx;
  std::vector<std::vector<float>> params;
  DType saved_inner = DType::kF32;  // the dtype of the first kNew entry Forward kept
};

// One training Forward and Backward in bf16 products, keeping the inner activations as `stored`.
Gradients Backpropagate(const std::string& spec, const Shape& sample, DType stored) {
  std::unique_ptr<Layer> layer = MakeLayer(spec, sample);
  CpuDevice device;
  const std::vector<Tensor> params = UniformParams(*layer, device, 5);
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  const Tensor x = UniformTensor(device, sample.WithBatch(3), 6, -1.0f, 1.0f);
  const Tensor dy = UniformTensor(device, layer->output_shape().WithBatch(3), 7, -1.0f, 1.0f);
  const LayerContext ctx{.device = device,
                         .product_precision = ProductPrecision::kBF16,
                         .saved_activation_dtype = stored};
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  EXPECT_TRUE(y.ok()) << y.status();
  Gradients out;
  const std::vector<SavedSpec> specs = layer->SavedPerSample();
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].activation_elements_per_sample > 0) {
      out.saved_inner = saved.tensors[i].dtype();
      break;
    }
  }
  absl::StatusOr<Tensor> dx = layer->Backward(ctx, params, grads, saved, dy);
  EXPECT_TRUE(dx.ok()) << dx.status();
  out.dx = Values(*dx);
  for (const Tensor& grad : grads) out.params.push_back(Values(grad));
  return out;
}

// A residual of linear -> relu -> linear: relu's output is read by relu (its sign) and by the
// second linear (a product operand), and relu of a rounded value is the rounded relu: bf16
// storage changes no bit of the forward. In the backward relu passes bf16 through
// (Layer::KeepsBf16): its output gradient is rounded, which the first linear's products do
// anyway, so only that linear's bias gradient (a sum of the rounded values) moves, by rounding.
TEST(Bf16SavedActivationsTest, ProductOperandsKeepEveryBitButTheBiasOfARoundedGradient) {
  const std::string spec =
      "name: 'r' residual { layers { name: 'a' linear { out_features: 12 } }"
      " layers { name: 'act' relu {} } layers { name: 'b' linear { out_features: 8 } } }";
  const Gradients f32 = Backpropagate(spec, Shape{4, 8}, DType::kF32);
  const Gradients bf16 = Backpropagate(spec, Shape{4, 8}, DType::kBF16);
  EXPECT_EQ(f32.saved_inner, DType::kF32);
  EXPECT_EQ(bf16.saved_inner, DType::kBF16);
  EXPECT_EQ(bf16.dx, f32.dx);
  ASSERT_EQ(bf16.params.size(), 4u);  // a.weight, a.bias, b.weight, b.bias
  EXPECT_EQ(bf16.params[0], f32.params[0]);
  EXPECT_EQ(bf16.params[2], f32.params[2]);
  EXPECT_EQ(bf16.params[3], f32.params[3]);
  // 12 rows of gradients of order 1, each rounded by at most 2^-9 relative.
  ASSERT_EQ(bf16.params[1].size(), f32.params[1].size());
  for (size_t i = 0; i < f32.params[1].size(); ++i) {
    EXPECT_NEAR(bf16.params[1][i], f32.params[1][i], 12 * 0x1p-9) << i;
  }
  EXPECT_NE(bf16.params[1], f32.params[1]);
}

// Composite blocks whose backward reads some saved values in f32: the gradients move, by about
// bf16's rounding (2^-9 relative) of those reads and no more. A transformer block's layer norm 2
// reads h, gelu its input and the fused attention O; a Llama block's second RMS norm reads h, the
// gating its inputs, the rotation q and k, and the fused attention O.
class Bf16BlockTest : public ::testing::TestWithParam<const char*> {};

TEST_P(Bf16BlockTest, GradientsMoveByRoundingOnly) {
  const std::string spec = GetParam();
  const Gradients f32 = Backpropagate(spec, Shape{5, 8}, DType::kF32);
  const Gradients bf16 = Backpropagate(spec, Shape{5, 8}, DType::kBF16);
  EXPECT_EQ(bf16.saved_inner, DType::kBF16);
  ASSERT_EQ(bf16.params.size(), f32.params.size());
  bool differs = bf16.dx != f32.dx;
  const auto expect_close = [&differs](const std::vector<float>& got,
                                       const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size());
    double scale = 0.0;
    for (float v : want) scale = std::max(scale, static_cast<double>(std::abs(v)));
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 2e-2 * scale) << i;
    }
    differs = differs || got != want;
  };
  expect_close(bf16.dx, f32.dx);
  for (size_t p = 0; p < f32.params.size(); ++p) {
    SCOPED_TRACE(p);
    expect_close(bf16.params[p], f32.params[p]);
  }
  EXPECT_TRUE(differs);
}

INSTANTIATE_TEST_SUITE_P(
    Blocks, Bf16BlockTest,
    ::testing::Values(
        "name: 'h' transformer_block { num_heads: 2 }",
        "name: 'h' llama_block { num_heads: 4 num_kv_heads: 2 intermediate_size: 12 }"),
    [](const ::testing::TestParamInfo<const char*>& info) {
      return std::string(info.index == 0 ? "TransformerBlock" : "LlamaBlock");
    });

}  // namespace
}  // namespace gpipe::testing
