#include "scaled_tanh_kernels.h"

namespace gpipe_example {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

__global__ void Forward(const float* x, const float* weight, float* y, int64_t n, int64_t features,
                        float scale) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = scale * weight[i % features] * tanhf(x[i]);
}

__global__ void WeightGrad(const float* x, const float* dy, float* dweight, int64_t rows,
                           int64_t features, float scale) {
  const int64_t f = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (f >= features) return;
  float sum = dweight[f];
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = r * features + f;
    sum += scale * dy[i] * tanhf(x[i]);
  }
  dweight[f] = sum;
}

__global__ void InputGrad(const float* x, const float* weight, const float* dy, float* dx,
                          int64_t n, int64_t features, float scale) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float t = tanhf(x[i]);
  dx[i] = dy[i] * scale * weight[i % features] * (1.0f - t * t);
}

}  // namespace

cudaError_t LaunchScaledTanhForward(const float* x, const float* weight, float* y, int64_t n,
                                    int64_t features, float scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  Forward<<<Blocks(n), kThreads, 0, stream>>>(x, weight, y, n, features, scale);
  return cudaGetLastError();
}

cudaError_t LaunchScaledTanhBackward(const float* x, const float* weight, const float* dy,
                                     float* dweight, float* dx, int64_t n, int64_t features,
                                     float scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  WeightGrad<<<Blocks(features), kThreads, 0, stream>>>(x, dy, dweight, n / features, features,
                                                        scale);
  if (dx != nullptr) {
    InputGrad<<<Blocks(n), kThreads, 0, stream>>>(x, weight, dy, dx, n, features, scale);
  }
  return cudaGetLastError();
}

}  // namespace gpipe_example
