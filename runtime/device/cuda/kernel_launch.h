// Grid sizing and launch checks shared by the CUDA kernels (.cu files include it).
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_KERNEL_LAUNCH_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_KERNEL_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "runtime/device/cuda/cuda_status.h"

namespace gpipe::cuda {

inline constexpr int kThreadsPerBlock = 256;

// Blocks of `threads` covering `n` elements with a grid-stride loop: at most `max_blocks`
// (kernels loop over the rest), at least 1.
inline unsigned BlocksFor(int64_t n, int threads = kThreadsPerBlock, int64_t max_blocks = 65535) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, max_blocks));
}

// The launch error of the kernel just issued (bad configuration, no kernel image for this
// GPU), as a Status naming `kernel`. Errors of the kernel's execution surface later, from the
// next call that synchronizes.
inline absl::Status LaunchStatus(const char* kernel) {
  return CudaStatus(cudaGetLastError(), kernel);
}

}  // namespace gpipe::cuda

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_KERNEL_LAUNCH_H_
