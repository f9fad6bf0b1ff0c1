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

// Row kernels run one block per row, in launches of at most 2^31 - 1 blocks each (the grid's x
// limit): `launch(first, count)` issues rows first .. first + count - 1 (row r is block
// r - first of that launch). Zero rows launch nothing.
template <typename Launch>
absl::Status ForEachRowChunk(int64_t rows, const char* kernel, Launch launch) {
  constexpr int64_t kMaxBlocks = 2147483647;
  for (int64_t first = 0; first < rows; first += kMaxBlocks) {
    launch(first, static_cast<unsigned>(std::min(kMaxBlocks, rows - first)));
    absl::Status status = LaunchStatus(kernel);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace gpipe::cuda

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_KERNEL_LAUNCH_H_
