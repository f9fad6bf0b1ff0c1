// CudaNormOps: RMS norm on the GPU, in the CPU backend's arithmetic (cpu_rms_norm_ops.cc): one
// block per row whose threads each sum a fixed stride of the row in double and combine in a fixed
// tree (block_reduce.cuh), rstd rounded to f32 once, the element-wise parts in the same f32
// expressions (the build turns off FMA contraction). The weight gradient is a column sum over
// the rows in double, in a fixed order (SumOverColumnLanes), added once: deterministic, no atomics.
#include <cstdint>

#include "runtime/device/cuda/block_reduce.cuh"
#include "runtime/device/cuda/cuda_norm_ops.h"
#include "runtime/device/cuda/device_pointer.h"
#include "runtime/device/cuda/kernel_launch.h"

namespace gpipe {
namespace {

constexpr int kRowThreads = 256;

static_assert(kRmsNormStatsPerRow == 1, "stats hold the row's rstd only");

__global__ void RmsNormForwardKernel(int64_t first_row, int64_t features, double eps,
                                     const float* x, const float* weight, float* y, float* stats) {
  __shared__ double scratch[32];
  const int64_t r = first_row + blockIdx.x;
  const float* xr = x + r * features;
  float* yr = y + r * features;
  double squares = 0.0;
  for (int64_t i = threadIdx.x; i < features; i += blockDim.x) {
    squares += static_cast<double>(xr[i]) * xr[i];
  }
  squares = cuda::BlockReduce(squares, cuda::SumOp(), scratch);
  const float rstd = static_cast<float>(1.0 / sqrt(squares / static_cast<double>(features) + eps));
  if (threadIdx.x == 0) stats[r] = rstd;
  // (x * rstd) * weight, in that order, as the CPU (transformers rounds the normalized row first).
  for (int64_t i = threadIdx.x; i < features; i += blockDim.x) yr[i] = (xr[i] * rstd) * weight[i];
}

__global__ void RmsNormBackwardInputKernel(int64_t first_row, int64_t features, const float* x,
                                           const float* stats, const float* dy, const float* weight,
                                           float* dx) {
  __shared__ double scratch[32];
  const int64_t r = first_row + blockIdx.x;
  const float* xr = x + r * features;
  const float* gr = dy + r * features;
  float* dxr = dx + r * features;
  const float rstd = stats[r];
  double sum_g_xhat = 0.0;
  for (int64_t i = threadIdx.x; i < features; i += blockDim.x) {
    sum_g_xhat += static_cast<double>(gr[i]) * weight[i] * (xr[i] * rstd);
  }
  sum_g_xhat = cuda::BlockReduce(sum_g_xhat, cuda::SumOp(), scratch);
  const float mean_g_xhat = static_cast<float>(sum_g_xhat * (1.0 / static_cast<double>(features)));
  for (int64_t i = threadIdx.x; i < features; i += blockDim.x) {
    dxr[i] = rstd * (gr[i] * weight[i] - (xr[i] * rstd) * mean_g_xhat);
  }
}

// dweight: column sums over the rows, 32 features per block and kColumnLanes threads down each
// feature (coalesced), in double, the lanes combined in a fixed order; a grid-stride loop over
// the feature tiles.
__global__ void RmsNormBackwardParamsKernel(int64_t rows, int64_t features, const float* x,
                                            const float* stats, const float* dy, float* dweight) {
  __shared__ double scratch[cuda::kColumnLanes * cuda::kColumnTile];
  for (int64_t tile = blockIdx.x; tile * cuda::kColumnTile < features; tile += gridDim.x) {
    const int64_t i = tile * cuda::kColumnTile + threadIdx.x;
    double sum = 0.0;
    if (i < features) {
      for (int64_t r = threadIdx.y; r < rows; r += cuda::kColumnLanes) {
        const int64_t at = r * features + i;
        sum += static_cast<double>(dy[at]) * (x[at] * stats[r]);
      }
    }
    sum = cuda::SumOverColumnLanes(sum, scratch);
    if (threadIdx.y == 0 && i < features) dweight[i] += static_cast<float>(sum);
  }
}

}  // namespace

absl::Status CudaNormOps::DoRmsNormForward(const RmsNormArgs& args, const Tensor& x, Tensor& y,
                                           Tensor& stats) const {
  const float* weight = DevicePointer<float>(args.weight);
  return cuda::ForEachRowChunk(args.rows, "RMS norm forward", [&](int64_t first, unsigned count) {
    RmsNormForwardKernel<<<count, kRowThreads, 0, context_.stream>>>(
        first, args.features, args.eps, DevicePointer<float>(x), weight, DevicePointer<float>(y),
        DevicePointer<float>(stats));
  });
}

absl::Status CudaNormOps::DoRmsNormBackwardInput(const RmsNormArgs& args, const Tensor& x,
                                                 const Tensor& stats, const Tensor& dy,
                                                 Tensor& dx) const {
  const float* weight = DevicePointer<float>(args.weight);
  return cuda::ForEachRowChunk(
      args.rows, "RMS norm backward input", [&](int64_t first, unsigned count) {
        RmsNormBackwardInputKernel<<<count, kRowThreads, 0, context_.stream>>>(
            first, args.features, DevicePointer<float>(x), DevicePointer<float>(stats),
            DevicePointer<float>(dy), weight, DevicePointer<float>(dx));
      });
}

absl::Status CudaNormOps::DoRmsNormBackwardParams(const RmsNormArgs& args, const Tensor& x,
                                                  const Tensor& stats, const Tensor& dy,
                                                  Tensor& dweight) const {
  const dim3 threads(cuda::kColumnTile, cuda::kColumnLanes);
  RmsNormBackwardParamsKernel<<<cuda::BlocksFor(args.features, cuda::kColumnTile), threads, 0,
                                context_.stream>>>(
      args.rows, args.features, DevicePointer<float>(x), DevicePointer<float>(stats),
      DevicePointer<float>(dy), DevicePointer<float>(dweight));
  return cuda::LaunchStatus("RMS norm backward params");
}

}  // namespace gpipe
