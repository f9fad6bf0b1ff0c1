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
#include "layers/dense.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/device/ops.h"
#include "tests/layers/make_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

struct Gradients {
  std::vector<float> y;
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
  out.y = Values(*y);
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

// Causal self-attention as it ran before its inner tensors were bf16, from its ops: f32 qkv, O,
// dO and dqkv, of which qkv and O were kept rounded to bf16 (StoredActivation) and widened for
// the backward. Same parameters and data as Backpropagate.
Gradients AttentionWithF32Inner(const std::string& spec, const Shape& sample, int64_t heads) {
  std::unique_ptr<Layer> layer = MakeLayer(spec, sample);
  CpuDevice device;
  const std::vector<Tensor> params = UniformParams(*layer, device, 5);
  std::vector<Tensor> grads = ZeroGrads(*layer, device);
  const Tensor x = UniformTensor(device, sample.WithBatch(3), 6, -1.0f, 1.0f);
  const Tensor dy = UniformTensor(device, layer->output_shape().WithBatch(3), 7, -1.0f, 1.0f);
  const int64_t t = sample.dim(0), d = sample.dim(1), rows = 3 * t;
  constexpr ProductPrecision kBf16 = ProductPrecision::kBF16;
  const auto empty = [&](const Shape& shape, DType dtype = DType::kF32) {
    return *Tensor::Empty(device, shape, dtype, MemoryKind::kActivation);
  };
  const auto kept = [&](const Tensor& value) {
    Tensor narrow = empty(value.shape(), DType::kBF16);
    Tensor wide = empty(value.shape());
    EXPECT_TRUE(device.ops().tensor.Cast(value, narrow).ok());
    EXPECT_TRUE(device.ops().tensor.Cast(narrow, wide).ok());
    return wide;
  };
  const FusedAttentionArgs args{
      .batch = 3,
      .t = t,
      .heads = heads,
      .head_dim = d / heads,
      .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d / heads))),
      .precision = kBf16};
  Tensor qkv = empty(Shape{3, t, 3 * d});
  Tensor o = empty(x.shape());
  Tensor lse = empty(Shape{3, heads, t});
  Tensor y = empty(x.shape());
  EXPECT_TRUE(DenseForward(device, x, rows, d, params[0], &params[1], 3 * d, qkv, kBf16).ok());
  EXPECT_TRUE(device.ops().attention.FusedCausalForward(args, qkv, o, lse).ok());
  EXPECT_TRUE(DenseForward(device, o, rows, d, params[2], &params[3], d, y, kBf16).ok());
  const Tensor qkv_kept = kept(qkv);
  const Tensor o_kept = kept(o);
  Tensor d_o = empty(x.shape());
  Tensor dqkv = empty(qkv.shape());
  Tensor dx = empty(x.shape());
  EXPECT_TRUE(DenseParamGrads(device, o_kept, dy, rows, d, d, grads[2], &grads[3], kBf16).ok());
  EXPECT_TRUE(DenseInputGrad(device, dy, rows, d, params[2], d, d_o, kBf16).ok());
  EXPECT_TRUE(
      device.ops().attention.FusedCausalBackward(args, qkv_kept, o_kept, lse, d_o, dqkv).ok());
  EXPECT_TRUE(DenseParamGrads(device, x, dqkv, rows, d, 3 * d, grads[0], &grads[1], kBf16).ok());
  EXPECT_TRUE(DenseInputGrad(device, dqkv, rows, 3 * d, params[0], d, dx, kBf16).ok());
  Gradients out{.y = Values(y), .dx = Values(dx)};
  for (const Tensor& grad : grads) out.params.push_back(Values(grad));
  return out;
}

// Causal self-attention under bf16 storage holds qkv, O, dO and dqkv as bf16 (written rounded by
// the products that make them, read as they are by the next ones). Every product rounded them
// anyway and D = rowsum(dO * O) read both rounded, so against the f32 inner tensors it had
// before, the output, the input gradient and three of the four parameter gradients keep every
// bit; the qkv bias gradient sums dqkv rounded to bf16 and moves by that rounding.
TEST(Bf16SavedActivationsTest, AttentionKeepsEveryBitButTheQkvBiasGradient) {
  const std::string spec = "name: 'attn' causal_self_attention { num_heads: 2 }";
  const Gradients before = AttentionWithF32Inner(spec, Shape{6, 8}, 2);
  const Gradients bf16 = Backpropagate(spec, Shape{6, 8}, DType::kBF16);
  EXPECT_EQ(bf16.saved_inner, DType::kBF16);
  EXPECT_EQ(bf16.y, before.y);
  EXPECT_EQ(bf16.dx, before.dx);
  ASSERT_EQ(bf16.params.size(), 4u);  // qkv.weight, qkv.bias, proj.weight, proj.bias
  EXPECT_EQ(bf16.params[0], before.params[0]);
  EXPECT_EQ(bf16.params[2], before.params[2]);
  EXPECT_EQ(bf16.params[3], before.params[3]);
  // Sums of 18 rows (3 samples of 6 positions) of dqkv, each rounded by at most 2^-9 relative
  // (|dqkv| < 1 here).
  ASSERT_EQ(bf16.params[1].size(), before.params[1].size());
  for (size_t i = 0; i < before.params[1].size(); ++i) {
    EXPECT_NEAR(bf16.params[1][i], before.params[1][i], 18 * 0x1p-9) << i;
  }
  EXPECT_NE(bf16.params[1], before.params[1]);
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
