#include "runtime/device/cuda/cuda_memory_pool.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_status.h"

namespace gpipe {

CudaMemoryPool::CudaMemoryPool(std::string label, cuda::MemPool pool, cudaStream_t stream,
                               int64_t limit_bytes, const Logger& logger)
    : label_(std::move(label)),
      pool_(std::move(pool)),
      stream_(stream),
      limit_bytes_(limit_bytes),
      logger_(logger) {}

std::string CudaMemoryPool::Describe(int64_t bytes, MemoryKind kind) const {
  return absl::StrCat(bytes, " bytes (", MemoryKindName(kind), ")");
}

cudaError_t CudaMemoryPool::TryAllocate(int64_t bytes, cudaStream_t stream, void** ptr) {
  // An empty tensor still gets a distinct block, so every Free has a real pointer to return.
  const size_t request = bytes == 0 ? 1 : static_cast<size_t>(bytes);
  const cudaError_t code = cudaMallocFromPoolAsync(ptr, request, pool_.get(), stream);
  // A failed call also leaves its code as the thread's last error; it is reported here, so it
  // must not surface again from the next Synchronize as if queued work had failed.
  if (code != cudaSuccess) cudaGetLastError();
  return code;
}

absl::StatusOr<void*> CudaMemoryPool::Allocate(int64_t bytes, MemoryKind kind) {
  return AllocateOn(bytes, kind, stream_);
}

absl::StatusOr<void*> CudaMemoryPool::AllocateOffStream(int64_t bytes, MemoryKind kind,
                                                        cudaStream_t side_stream) {
  ASSIGN_OR_RETURN(void* ptr, AllocateOn(bytes, kind, side_stream));
  if (const cudaError_t code = cudaStreamSynchronize(side_stream); code != cudaSuccess) {
    Free(ptr, bytes, kind);
    return CudaStatus(code, "cudaStreamSynchronize(capture memory)");
  }
  return ptr;
}

absl::StatusOr<void*> CudaMemoryPool::AllocateOn(int64_t bytes, MemoryKind kind,
                                                 cudaStream_t stream) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(label_, ": allocating a negative size (", bytes, " bytes)"));
  }
  if (limit_bytes_ > 0 && memory_.current() + bytes > limit_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(label_, ": allocating ", Describe(bytes, kind),
                                                     " exceeds the limit of ", limit_bytes_,
                                                     " bytes (", memory_.current(), " in use)"));
  }
  void* ptr = nullptr;
  cudaError_t code = TryAllocate(bytes, stream, &ptr);
  if (code == cudaErrorMemoryAllocation) {
    // The pool may hold freed blocks of other sizes that it cannot split for this request: let
    // the frees queued on the stream complete, give the pool's cache back to the GPU and try
    // once more.
    GPIPE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    GPIPE_CUDA_RETURN_IF_ERROR(cudaMemPoolTrimTo(pool_.get(), 0));
    code = TryAllocate(bytes, stream, &ptr);
  }
  if (code == cudaErrorMemoryAllocation) {
    const std::string limit = limit_bytes_ > 0
                                  ? absl::StrCat("the limit of ", limit_bytes_, " bytes")
                                  : std::string("no limit set");
    return absl::ResourceExhaustedError(absl::StrCat(
        label_, ": out of GPU memory allocating ", Describe(bytes, kind), " (", memory_.current(),
        " bytes in use, ", limit, "); lower the micro-batch size or move layers to other stages"));
  }
  if (code != cudaSuccess) {
    const absl::Status status = CudaStatus(code, "cudaMallocFromPoolAsync");
    return absl::Status(status.code(), absl::StrCat(label_, ": allocating ", Describe(bytes, kind),
                                                    ": ", status.message()));
  }
  memory_.Allocated(kind, bytes);
  return ptr;
}

void CudaMemoryPool::Free(void* ptr, int64_t bytes, MemoryKind kind) {
  memory_.Freed(kind, bytes);
  const cudaError_t code = cudaFreeAsync(ptr, stream_);
  if (code == cudaSuccess) return;
  cudaGetLastError();  // logged here; not an error of queued work
  logger_.Error(absl::StrCat(
      label_, ": freeing ", Describe(bytes, kind),
      " failed, the block stays allocated: ", CudaStatus(code, "cudaFreeAsync").message()));
}

void CudaMemoryPool::Recount(int64_t bytes, MemoryKind from, MemoryKind to) {
  memory_.Moved(from, to, bytes);
}

}  // namespace gpipe
