#include <cstdint>

#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_status.h"
#include "runtime/device/cuda/device_pointer.h"
#include "runtime/device/cuda/id_check.h"
#include "runtime/device/cuda/kernel_launch.h"

namespace gpipe::cuda {
namespace {

// first[0] = the lowest bad index (n when none): atomicMin keeps the minimum whatever the order.
__global__ void FirstBadKernel(const int64_t* ids, int64_t n, int64_t limit,
                               unsigned long long* first) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    if (ids[i] < 0 || ids[i] >= limit) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

}  // namespace

absl::StatusOr<std::optional<BadId>> FirstBadId(const CudaContext& context, const Tensor& ids,
                                                int64_t limit) {
  const int64_t n = ids.num_elements();
  if (n == 0) return std::optional<BadId>();
  ASSIGN_OR_RETURN(Tensor first, Tensor::Empty(*context.workspace, Shape{1}, DType::kI64,
                                               MemoryKind::kWorkspace));
  int64_t* first_ptr = DevicePointer<int64_t>(first);
  GPIPE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(first_ptr, &n, sizeof(n), cudaMemcpyHostToDevice, context.stream));
  FirstBadKernel<<<BlocksFor(n), kThreadsPerBlock, 0, context.stream>>>(
      DevicePointer<int64_t>(ids), n, limit, reinterpret_cast<unsigned long long*>(first_ptr));
  RETURN_IF_ERROR(LaunchStatus("id range check"));
  int64_t bad_index = n;
  GPIPE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&bad_index, first_ptr, sizeof(bad_index),
                                             cudaMemcpyDeviceToHost, context.stream));
  GPIPE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(context.stream));
  if (bad_index >= n) return std::optional<BadId>();
  int64_t bad_id = 0;
  GPIPE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&bad_id, DevicePointer<int64_t>(ids) + bad_index,
                                             sizeof(bad_id), cudaMemcpyDeviceToHost,
                                             context.stream));
  GPIPE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(context.stream));
  return std::optional<BadId>(BadId{.index = bad_index, .id = bad_id});
}

}  // namespace gpipe::cuda
