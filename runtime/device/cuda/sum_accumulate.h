// Fixed-order sums on the GPU shared by the ops: out[m] += sum over o and i of
// in[(o * mid + m) * inner + i] (f32, or bf16 widened exactly), accumulated in double, in the same
// order every run (not the CPU backend's left-to-right order: results agree to the rounding of a
// double sum, which the float output almost always hides). Used for bias gradients of linear and
// convolution layers.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_SUM_ACCUMULATE_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_SUM_ACCUMULATE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/device/cuda/bf16_elements.cuh"

namespace gpipe::cuda {

// Enqueues the sum on `stream` (mid > 0); the caller checks the launch (LaunchStatus).
void LaunchSumAccumulate(F32OrBf16In in, int64_t outer, int64_t mid, int64_t inner, float* out,
                         cudaStream_t stream);

}  // namespace gpipe::cuda

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_SUM_ACCUMULATE_H_
