// CudnnAttention (runtime/device/cuda/cudnn_attention.h) on its own, beside the conformance
// suite's cuda_fused cases (which check its numbers through AttentionOps): that cuDNN really
// takes bf16 storage's calls at the head sizes models use (a shape it declined would pass the
// conformance suite on the backend's own kernels and be measured as cuDNN's), that it declines
// what it does not take, plans once per shape, gives the same bits on every call, and that its
// results agree with the backend's kernels. A build without cudnn-frontend checks only that the
// option is refused. GPU cases skip where no GPU is visible.
#include "runtime/device/cuda/cudnn_attention.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/tensor.h"
#include "runtime/device/cuda/cuda_device.h"
#include "runtime/device/cuda/cuda_handles.h"
#include "runtime/device/ops.h"

namespace gpipe {
namespace {

using ::testing::HasSubstr;

TEST(CudnnAttentionTest, WithoutTheFrontendTheOptionIsRefusedSayingHowToGetIt) {
  if (cuda::CudnnAttention::Available()) GTEST_SKIP() << "this build has cudnn-frontend";
  absl::StatusOr<std::unique_ptr<Device>> device =
      CreateCudaDevice({.ordinal = 0, .cudnn_attention = true});
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition) << device.status();
  EXPECT_THAT(device.status().message(), HasSubstr("scripts/cudnn_frontend.sh"));
}

class CudnnAttentionOnGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (VisibleGpuCount() == 0) GTEST_SKIP() << "no GPU is visible to this process";
    if (!cuda::CudnnAttention::Available()) GTEST_SKIP() << "built without cudnn-frontend";
    absl::StatusOr<std::unique_ptr<Device>> device = CreateCudaDevice({.ordinal = 0});
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = *std::move(device);
    absl::StatusOr<cuda::CudnnHandle> cudnn = cuda::CreateCudnn(ComputeStreamOf(*device_));
    ASSERT_TRUE(cudnn.ok()) << cudnn.status();
    cudnn_ = *std::move(cudnn);
    context_ = {.ordinal = 0,
                .stream = ComputeStreamOf(*device_),
                .cudnn = cudnn_.get(),
                .workspace = device_.get()};
  }

  Tensor Empty(const Shape& shape, DType dtype) {
    absl::StatusOr<Tensor> tensor = Tensor::Empty(*device_, shape, dtype, MemoryKind::kActivation);
    EXPECT_TRUE(tensor.ok()) << tensor.status();
    return *std::move(tensor);
  }
  // Deterministic values in [-scale, scale] as a tensor of `dtype`.
  Tensor Values(const Shape& shape, DType dtype, int seed, float scale) {
    std::vector<float> values(shape.num_elements());
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = scale * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(seed));
    }
    Tensor wide = Empty(shape, DType::kF32);
    EXPECT_TRUE(device_->CopyFromHost(values.data(), wide.num_elements() * 4, wide).ok());
    if (dtype == DType::kF32) return wide;
    Tensor narrow = Empty(shape, DType::kBF16);
    EXPECT_TRUE(device_->ops().tensor.Cast(wide, narrow).ok());
    return narrow;
  }
  std::vector<float> Read(const Tensor& tensor) {
    Tensor wide = tensor;
    if (tensor.dtype() == DType::kBF16) {
      wide = Empty(tensor.shape(), DType::kF32);
      EXPECT_TRUE(device_->ops().tensor.Cast(tensor, wide).ok());
    }
    std::vector<float> values(wide.num_elements());
    EXPECT_TRUE(device_->CopyToHost(wide, values.data(), wide.num_elements() * 4).ok());
    return values;
  }

  std::unique_ptr<Device> device_;
  cuda::CudnnHandle cudnn_;
  CudaContext context_;
};

FusedAttentionArgs Args(int64_t batch, int64_t t, int64_t heads, int64_t head_dim) {
  return {.batch = batch,
          .t = t,
          .heads = heads,
          .head_dim = head_dim,
          .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim))),
          .precision = ProductPrecision::kBF16};
}

// The transformer block's head sizes: cuDNN takes them, once per shape and direction, with the
// same bits every call, close to the backend's own kernels on the same bf16 tensors.
TEST_F(CudnnAttentionOnGpuTest, TakesBf16StorageAtModelHeadSizesAndAgreesWithTheKernels) {
  for (const int64_t head_dim : {64, 128}) {
    SCOPED_TRACE(head_dim);
    const FusedAttentionArgs args = Args(2, 256, 4, head_dim);
    const int64_t w = args.heads * head_dim;
    const Shape qkv_shape{args.batch, args.t, 3 * w}, out_shape{args.batch, args.t, w};
    const Tensor qkv = Values(qkv_shape, DType::kBF16, 1, 0.5f);
    const Tensor dout = Values(out_shape, DType::kBF16, 2, 1.0f);
    cuda::CudnnAttention attention(context_);
    auto run = [&](std::vector<float>& out_values, std::vector<float>& dqkv_values) {
      Tensor out = Empty(out_shape, DType::kBF16);
      Tensor lse = Empty(Shape{args.batch, args.heads, args.t}, DType::kF32);
      Tensor dqkv = Empty(qkv_shape, DType::kBF16);
      absl::StatusOr<bool> forward = attention.Forward(args, qkv, out, lse);
      ASSERT_TRUE(forward.ok()) << forward.status();
      EXPECT_TRUE(*forward) << "cuDNN declined the forward";
      absl::StatusOr<bool> backward = attention.Backward(args, qkv, out, lse, dout, dqkv);
      ASSERT_TRUE(backward.ok()) << backward.status();
      EXPECT_TRUE(*backward) << "cuDNN declined the deterministic backward";
      out_values = Read(out);
      dqkv_values = Read(dqkv);
    };
    std::vector<float> out, dqkv, out_again, dqkv_again;
    run(out, dqkv);
    run(out_again, dqkv_again);
    EXPECT_EQ(attention.shapes(), 2);
    EXPECT_EQ(attention.shapes_with_plan(), 2);
    EXPECT_EQ(out, out_again);
    EXPECT_EQ(dqkv, dqkv_again);

    // The backend's kernels on the same tensors (the device was made without the option).
    Tensor out_k = Empty(out_shape, DType::kBF16);
    Tensor lse_k = Empty(Shape{args.batch, args.heads, args.t}, DType::kF32);
    Tensor dqkv_k = Empty(qkv_shape, DType::kBF16);
    const AttentionOps& kernels = device_->ops().attention;
    ASSERT_TRUE(kernels.FusedCausalForward(args, qkv, out_k, lse_k).ok());
    ASSERT_TRUE(kernels.FusedCausalBackward(args, qkv, out_k, lse_k, dout, dqkv_k).ok());
    const std::vector<float> out_kernels = Read(out_k), dqkv_expected = Read(dqkv_k);
    double out_error = 0, dqkv_error = 0, dqkv_max = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      out_error = std::max(out_error, static_cast<double>(std::fabs(out[i] - out_kernels[i])));
    }
    for (size_t i = 0; i < dqkv.size(); ++i) {
      dqkv_error = std::max(dqkv_error, static_cast<double>(std::fabs(dqkv[i] - dqkv_expected[i])));
      dqkv_max = std::max(dqkv_max, static_cast<double>(std::fabs(dqkv_expected[i])));
    }
    // Two bf16 roundings of values within [-1, 1] apart, and P / dS rounded at different points
    // (the conformance suite's oracle tolerances, ops_fused_attention_test.cc).
    EXPECT_LE(out_error, 1.2e-2);
    EXPECT_LE(dqkv_error, 2e-2 * std::max(1.0, dqkv_max));
    RecordProperty("out_error", std::to_string(out_error));
    RecordProperty("dqkv_error", std::to_string(dqkv_error));
  }
}

// f32 tensors, products other than kBF16 and head sizes not a multiple of 8 are not its calls:
// declined with nothing planned.
TEST_F(CudnnAttentionOnGpuTest, DeclinesWhatItDoesNotTake) {
  cuda::CudnnAttention attention(context_);
  const FusedAttentionArgs args = Args(1, 16, 2, 64);
  const Tensor qkv32 = Values(Shape{1, 16, 384}, DType::kF32, 1, 0.5f);
  const Tensor qkv16 = Values(Shape{1, 16, 384}, DType::kBF16, 1, 0.5f);
  Tensor out16 = Empty(Shape{1, 16, 128}, DType::kBF16);
  Tensor lse = Empty(Shape{1, 2, 16}, DType::kF32);
  FusedAttentionArgs f32_products = args;
  f32_products.precision = ProductPrecision::kF32;
  for (const auto& [what, result] :
       {std::pair{"f32 qkv", attention.Forward(args, qkv32, out16, lse)},
        std::pair{"f32 products", attention.Forward(f32_products, qkv16, out16, lse)}}) {
    ASSERT_TRUE(result.ok()) << what << ": " << result.status();
    EXPECT_FALSE(*result) << what;
  }
  const Tensor odd_qkv = Values(Shape{1, 16, 12 * 3}, DType::kBF16, 1, 0.5f);
  Tensor odd_out = Empty(Shape{1, 16, 12}, DType::kBF16);
  absl::StatusOr<bool> odd = attention.Forward(Args(1, 16, 2, 6), odd_qkv, odd_out, lse);
  ASSERT_TRUE(odd.ok()) << odd.status();
  EXPECT_FALSE(*odd) << "head_dim 6";
  EXPECT_EQ(attention.shapes(), 0);
}

}  // namespace
}  // namespace gpipe
