// The CUDA kernels of the example's scaled_tanh layer, behind a plain C++ interface (raw device
// pointers and a stream), so that they compile with nvcc alone and the layer around them
// (scaled_tanh_cuda.cc) with the host compiler and gpipe's headers. Each call enqueues its work
// on `stream` and returns the launch's error.
#ifndef GPIPE_EXAMPLES_EMBED_SCALED_TANH_KERNELS_H_
#define GPIPE_EXAMPLES_EMBED_SCALED_TANH_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace gpipe_example {

// y[i] = scale * weight[i % features] * tanh(x[i]) for i < n.
cudaError_t LaunchScaledTanhForward(const float* x, const float* weight, float* y, int64_t n,
                                    int64_t features, float scale, cudaStream_t stream);
// dweight[f] += scale * sum over rows r of dy[r, f] * tanh(x[r, f]), rows in order (one thread
// per feature: the same sums, in the same order, as the CPU kernel's loop); and, when dx is not
// null, dx[i] = dy[i] * scale * weight[i % features] * (1 - tanh(x[i])^2).
cudaError_t LaunchScaledTanhBackward(const float* x, const float* weight, const float* dy,
                                     float* dweight, float* dx, int64_t n, int64_t features,
                                     float scale, cudaStream_t stream);

}  // namespace gpipe_example

#endif  // GPIPE_EXAMPLES_EMBED_SCALED_TANH_KERNELS_H_
