#include <cmath>
#include <cstdint>

#include "runtime/device/cuda/block_reduce.cuh"
#include "runtime/device/cuda/cuda_attention_ops.h"
#include "runtime/device/cuda/device_pointer.h"
#include "runtime/device/cuda/kernel_launch.h"

namespace gpipe {
namespace {

constexpr int kRowThreads = 256;

// One block per score row (blocks * t rows). Row i of a block sees columns 0..i; the rest become
// exact zeros. Same arithmetic as the CPU backend: float exponentials of (score - max), their sum
// in double (here a fixed tree instead of a left-to-right loop), one float reciprocal.
__global__ void CausalSoftmaxForwardKernel(int64_t first_row, int64_t t, float* scores) {
  __shared__ float max_scratch[32];
  __shared__ double sum_scratch[32];
  const int64_t r = first_row + blockIdx.x;
  float* row = scores + r * t;
  const int64_t len = r % t + 1;
  float max = -INFINITY;
  for (int64_t s = threadIdx.x; s < len; s += blockDim.x) max = cuda::MaxOp()(max, row[s]);
  max = cuda::BlockReduce(max, cuda::MaxOp(), max_scratch);
  double sum = 0.0;
  for (int64_t s = threadIdx.x; s < len; s += blockDim.x) {
    const float e = expf(row[s] - max);
    row[s] = e;
    sum += e;
  }
  sum = cuda::BlockReduce(sum, cuda::SumOp(), sum_scratch);
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int64_t s = threadIdx.x; s < t; s += blockDim.x) row[s] = s < len ? row[s] * inv_sum : 0.0f;
}

__global__ void CausalSoftmaxBackwardKernel(int64_t first_row, int64_t t, float scale,
                                            const float* probs, float* grad) {
  __shared__ double scratch[32];
  const int64_t r = first_row + blockIdx.x;
  const float* p = probs + r * t;
  float* row = grad + r * t;
  const int64_t len = r % t + 1;
  double dot = 0.0;
  for (int64_t s = threadIdx.x; s < len; s += blockDim.x) {
    dot += static_cast<double>(row[s]) * p[s];
  }
  const float dot_f = static_cast<float>(cuda::BlockReduce(dot, cuda::SumOp(), scratch));
  for (int64_t s = threadIdx.x; s < t; s += blockDim.x) {
    row[s] = s < len ? scale * p[s] * (row[s] - dot_f) : 0.0f;
  }
}

}  // namespace

absl::Status CudaAttentionOps::DoCausalSoftmaxForward(int64_t blocks, int64_t t,
                                                      Tensor& scores) const {
  float* base = DevicePointer<float>(scores);
  return cuda::ForEachRowChunk(
      blocks * t, "causal softmax forward", [&](int64_t first, unsigned count) {
        CausalSoftmaxForwardKernel<<<count, kRowThreads, 0, context_.stream>>>(first, t, base);
      });
}

absl::Status CudaAttentionOps::DoCausalSoftmaxBackward(int64_t blocks, int64_t t, float scale,
                                                       const Tensor& probs, Tensor& grad) const {
  const float* p = DevicePointer<float>(probs);
  float* g = DevicePointer<float>(grad);
  return cuda::ForEachRowChunk(
      blocks * t, "causal softmax backward", [&](int64_t first, unsigned count) {
        CausalSoftmaxBackwardKernel<<<count, kRowThreads, 0, context_.stream>>>(first, t, scale, p,
                                                                                g);
      });
}

}  // namespace gpipe
