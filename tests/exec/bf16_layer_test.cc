// Bf16Layer's storage (training.precision BF16): it takes and returns bf16 tensors and keeps its
// saved input and output as the bf16 tensors, while computing exactly what the inner layer
// computes at bf16 product precision with its output and input gradient rounded to bf16 values in
// f32 tensors (the BF16 mode before bf16 storage, written out here as the reference).
#include "runtime/exec/bf16_layer.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/core/bf16.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/device/ops.h"
#include "runtime/exec/bf16_loss.h"
#include "tests/layers/make_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

constexpr int64_t kBatch = 3;

Tensor Cast(Device& device, const Tensor& in, DType dtype) {
  absl::StatusOr<Tensor> out = Tensor::Empty(device, in.shape(), dtype, MemoryKind::kData);
  EXPECT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(device.ops().tensor.Cast(in, *out).ok());
  return *out;
}

// An f32 tensor whose values are bf16 values.
Tensor RoundedTensor(Device& device, const Shape& shape, uint64_t seed) {
  return Cast(device, Cast(device, UniformTensor(device, shape, seed, -1.0f, 1.0f), DType::kBF16),
              DType::kF32);
}

std::vector<float> Rounded(std::vector<float> values) {
  for (float& v : values) v = RoundToBf16(v);
  return values;
}

void ExpectSameBits(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) ASSERT_EQ(actual[i], expected[i]) << "[" << i << "]";
}

struct Case {
  std::string layer;
  Shape input;
};

class Bf16LayerTest : public ::testing::TestWithParam<Case> {};

TEST_P(Bf16LayerTest, StoresBf16AndComputesTheRoundedF32Values) {
  CpuDevice device;
  const Case& c = GetParam();
  std::unique_ptr<Layer> reference = MakeLayer(c.layer, c.input);
  const Bf16Layer layer(MakeLayer(c.layer, c.input));
  EXPECT_EQ(layer.output_dtype(), DType::kBF16);
  const std::vector<Tensor> params = UniformParams(layer, device, 7);
  const Tensor x = RoundedTensor(device, c.input.WithBatch(kBatch), 8);
  const Tensor dy = RoundedTensor(device, layer.output_shape().WithBatch(kBatch), 9);

  // The reference: f32 tensors, bf16 products, the output rounded in place before backward.
  LayerContext bf16_products{.device = device};
  bf16_products.product_precision = ProductPrecision::kBF16;
  SavedTensors reference_saved;
  absl::StatusOr<Tensor> reference_y =
      reference->Forward(bf16_products, params, x, reference_saved);
  ASSERT_TRUE(reference_y.ok()) << reference_y.status();
  if (!reference_y->SharesStorageWith(x)) {
    ASSERT_TRUE(
        device.ops().tensor.Cast(Cast(device, *reference_y, DType::kBF16), *reference_y).ok());
  }
  std::vector<Tensor> reference_grads = ZeroGrads(layer, device);
  absl::StatusOr<Tensor> reference_dx =
      reference->Backward(bf16_products, params, reference_grads, reference_saved, dy);
  ASSERT_TRUE(reference_dx.ok()) << reference_dx.status();

  // Bf16Layer on bf16 tensors of the same values.
  const LayerContext ctx{.device = device};
  const Tensor x16 = Cast(device, x, DType::kBF16);
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer.Forward(ctx, params, x16, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype(), DType::kBF16);
  ExpectSameBits(Values(Cast(device, *y, DType::kF32)), Rounded(Values(*reference_y)));
  // What the layer keeps of its input and output is the bf16 tensors themselves.
  ASSERT_EQ(saved.tensors.size(), reference_saved.tensors.size());
  for (size_t i = 0; i < saved.tensors.size(); ++i) {
    const Tensor& entry = reference_saved.tensors[i];
    if (entry.SharesStorageWith(x) || entry.SharesStorageWith(*reference_y)) {
      SCOPED_TRACE(i);
      EXPECT_EQ(saved.tensors[i].dtype(), DType::kBF16);
      EXPECT_TRUE(saved.tensors[i].SharesStorageWith(x16) ||
                  saved.tensors[i].SharesStorageWith(*y));
    }
  }
  std::vector<Tensor> grads = ZeroGrads(layer, device);
  absl::StatusOr<Tensor> dx =
      layer.Backward(ctx, params, grads, saved, Cast(device, dy, DType::kBF16));
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_EQ(dx->dtype(), DType::kBF16);
  ExpectSameBits(Values(Cast(device, *dx, DType::kF32)), Rounded(Values(*reference_dx)));
  ASSERT_EQ(grads.size(), reference_grads.size());
  for (size_t p = 0; p < grads.size(); ++p) {
    SCOPED_TRACE(p);
    EXPECT_EQ(grads[p].dtype(), DType::kF32);
    ExpectSameBits(Values(grads[p]), Values(reference_grads[p]));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layers, Bf16LayerTest,
    ::testing::Values(Case{"name: 'fc' linear { out_features: 5 }", Shape{4}},  // saves its input
                      Case{"name: 't' tanh {}", Shape{6}},                      // saves its output
                      Case{"name: 'g' gelu {}", Shape{6}},  // takes and gives bf16 itself
                      Case{"name: 'r' relu {}", Shape{6}},
                      Case{"name: 'ln' layer_norm {}", Shape{2, 8}},  // and new statistics
                      Case{"name: 'f' flatten {}", Shape{2, 3}},      // a view of its input
                      Case{"name: 'c' conv2d { out_channels: 2 kernel_size: 3 padding: 1 }",
                           Shape{1, 4, 4}}));

// Asked to (LayerContext::bf16_output, bf16_input_grad), attention writes its output and input
// gradient as bf16: the bits of its f32 ones rounded, and the same parameter gradients.
TEST(Bf16OutputsTest, AttentionWritesTheRoundedOutputAndInputGradient) {
  CpuDevice device;
  const std::unique_ptr<Layer> layer =
      MakeLayer("name: 'a' causal_self_attention { num_heads: 2 }", Shape{5, 8});
  const std::vector<Tensor> params = UniformParams(*layer, device, 3);
  const Tensor x = RoundedTensor(device, Shape{kBatch, 5, 8}, 4);
  const Tensor dy = RoundedTensor(device, Shape{kBatch, 5, 8}, 5);
  struct Run {
    Tensor y, dx;
    std::vector<Tensor> grads;
  };
  const auto run = [&](bool bf16) {
    LayerContext ctx{.device = device, .product_precision = ProductPrecision::kBF16};
    ctx.bf16_output = bf16;
    ctx.bf16_input_grad = bf16;
    Run out;
    SavedTensors saved;
    absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
    EXPECT_TRUE(y.ok()) << y.status();
    out.grads = ZeroGrads(*layer, device);
    absl::StatusOr<Tensor> dx = layer->Backward(ctx, params, out.grads, saved, dy);
    EXPECT_TRUE(dx.ok()) << dx.status();
    out.y = *y;
    out.dx = *dx;
    return out;
  };
  const Run wide = run(false);
  const Run narrow = run(true);
  EXPECT_EQ(wide.y.dtype(), DType::kF32);
  EXPECT_EQ(narrow.y.dtype(), DType::kBF16);
  EXPECT_EQ(narrow.dx.dtype(), DType::kBF16);
  ExpectSameBits(Values(Cast(device, narrow.y, DType::kF32)), Rounded(Values(wide.y)));
  ExpectSameBits(Values(Cast(device, narrow.dx, DType::kF32)), Rounded(Values(wide.dx)));
  for (size_t p = 0; p < wide.grads.size(); ++p) {
    SCOPED_TRACE(p);
    ExpectSameBits(Values(narrow.grads[p]), Values(wide.grads[p]));
  }
}

TEST(Bf16StorageTest, SavedInputTakesHalfTheBytes) {
  CpuDevice device;
  const Bf16Layer layer(MakeLayer("name: 'fc' linear { out_features: 5 }", Shape{4}));
  const std::vector<Tensor> params = UniformParams(layer, device, 1);
  const Tensor x = Cast(device, RoundedTensor(device, Shape{kBatch, 4}, 2), DType::kBF16);
  SavedTensors saved;
  const int64_t before = device.memory().current(MemoryKind::kActivation);
  absl::StatusOr<Tensor> y = layer.Forward(LayerContext{.device = device}, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(saved.tensors.size(), 1u);
  EXPECT_EQ(saved.tensors[0].bytes(), kBatch * 4 * 2);
  // Held after the call: the bf16 output only (the f32 copies lived inside it).
  EXPECT_EQ(device.memory().current(MemoryKind::kActivation) - before, kBatch * 5 * 2);
}

TEST(Bf16StorageTest, LossComputesOnTheWidenedOutput) {
  CpuDevice device;
  const std::unique_ptr<Loss> reference = MakeLoss("softmax_cross_entropy {}");
  const Bf16Loss loss(MakeLoss("softmax_cross_entropy {}"));
  const Tensor output = RoundedTensor(device, Shape{kBatch, 4}, 3);
  const Tensor targets = I64Tensor(device, Shape{kBatch}, {0, 3, 1});
  absl::StatusOr<Tensor> reference_totals =
      Tensor::Zeros(device, Shape{kLossTotalsSize}, DType::kF64, MemoryKind::kData);
  absl::StatusOr<Tensor> totals =
      Tensor::Zeros(device, Shape{kLossTotalsSize}, DType::kF64, MemoryKind::kData);
  ASSERT_TRUE(reference_totals.ok() && totals.ok());
  absl::StatusOr<Tensor> reference_grad =
      reference->Compute(device, output, targets, kBatch, *reference_totals);
  absl::StatusOr<Tensor> grad =
      loss.Compute(device, Cast(device, output, DType::kBF16), targets, kBatch, *totals);
  ASSERT_TRUE(reference_grad.ok() && grad.ok()) << grad.status();
  EXPECT_EQ(grad->dtype(), DType::kF32);
  ExpectSameBits(Values(*grad), Values(*reference_grad));
  std::vector<double> sums(kLossTotalsSize), reference_sums(kLossTotalsSize);
  ASSERT_TRUE(device.CopyToHost(*totals, sums.data(), totals->bytes()).ok());
  ASSERT_TRUE(
      device.CopyToHost(*reference_totals, reference_sums.data(), reference_totals->bytes()).ok());
  EXPECT_EQ(sums, reference_sums);
}

}  // namespace
}  // namespace gpipe::testing
