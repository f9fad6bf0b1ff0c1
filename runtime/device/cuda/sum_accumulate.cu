#include "runtime/device/cuda/block_reduce.cuh"
#include "runtime/device/cuda/kernel_launch.h"
#include "runtime/device/cuda/sum_accumulate.h"

namespace gpipe::cuda {
namespace {

// inner == 1 (a linear layer's bias gradient: in is [outer, mid]): 32 columns per block,
// kColumnLanes threads down each column, coalesced along the rows.
__global__ void SumAccumulateColumnsKernel(F32OrBf16In in, int64_t rows, int64_t cols, float* out) {
  __shared__ double scratch[kColumnLanes * kColumnTile];
  for (int64_t tile = blockIdx.x; tile * kColumnTile < cols; tile += gridDim.x) {
    const int64_t m = tile * kColumnTile + threadIdx.x;
    double sum = 0.0;
    if (m < cols) {
      for (int64_t r = threadIdx.y; r < rows; r += kColumnLanes) sum += in[r * cols + m];
    }
    sum = SumOverColumnLanes(sum, scratch);
    if (threadIdx.y == 0 && m < cols) out[m] += static_cast<float>(sum);
  }
}

// inner > 1 (e.g. a convolution's bias over [batch, channels, positions]): one block per output
// m, its threads striding over the (o, i) pairs (contiguous in i), then the block's tree.
__global__ void SumAccumulateSpreadKernel(F32OrBf16In in, int64_t outer, int64_t mid, int64_t inner,
                                          float* out) {
  __shared__ double scratch[32];
  const int64_t count = outer * inner;
  for (int64_t m = blockIdx.x; m < mid; m += gridDim.x) {
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
      const int64_t o = j / inner;
      sum += in[(o * mid + m) * inner + (j - o * inner)];
    }
    sum = BlockReduce(sum, SumOp{}, scratch);
    if (threadIdx.x == 0) out[m] += static_cast<float>(sum);
  }
}

}  // namespace

void LaunchSumAccumulate(F32OrBf16In in, int64_t outer, int64_t mid, int64_t inner, float* out,
                         cudaStream_t stream) {
  if (inner == 1) {
    const dim3 threads(kColumnTile, kColumnLanes);
    SumAccumulateColumnsKernel<<<BlocksFor(mid, kColumnTile), threads, 0, stream>>>(in, outer, mid,
                                                                                    out);
  } else {
    SumAccumulateSpreadKernel<<<BlocksFor(mid, 1), kThreadsPerBlock, 0, stream>>>(in, outer, mid,
                                                                                  inner, out);
  }
}

}  // namespace gpipe::cuda
