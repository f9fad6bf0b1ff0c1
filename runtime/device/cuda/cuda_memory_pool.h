// CudaMemoryPool: a GPU's memory as an Allocator. Blocks come from cudaMallocFromPoolAsync on a
// private cudaMemPool (see cuda::CreateMemPool: freed blocks stay in the pool for reuse) and go
// back with cudaFreeAsync, both on the compute stream, so a block freed while queued kernels
// still read it is handed out again only after them (the Device's stream-ordered free). CUDA
// aligns blocks as cudaMalloc does (256 bytes), beyond the 64 the Allocator contract asks.
//
// Every live byte is counted by kind in a MemoryTracker (current and peak); blocks cached in the
// pool are not. An allocation beyond memory_limit_bytes, or one the GPU has no room for even
// after the pool gave its cached blocks back, fails with RESOURCE_EXHAUSTED naming the request,
// its kind, the limit and the bytes in use. Free never fails: it runs in Tensor destructors, so
// an error there is logged and the block is given up.
//
// Thread-safety: Allocate, Free and Recount may be called from any thread (cudaMallocAsync and
// cudaFreeAsync are thread-safe); memory() is thread-safe.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_MEMORY_POOL_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_MEMORY_POOL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/core/allocator.h"
#include "runtime/core/logger.h"
#include "runtime/core/memory_tracker.h"
#include "runtime/device/cuda/cuda_handles.h"

namespace gpipe {

class CudaMemoryPool final : public Allocator {
 public:
  // `label` ("cuda:0") starts error messages; `stream` (not owned) must outlive the pool, as
  // must `logger`. `limit_bytes` > 0 caps the live bytes.
  CudaMemoryPool(std::string label, cuda::MemPool pool, cudaStream_t stream, int64_t limit_bytes,
                 const Logger& logger);
  CudaMemoryPool(const CudaMemoryPool&) = delete;
  CudaMemoryPool& operator=(const CudaMemoryPool&) = delete;

  absl::StatusOr<void*> Allocate(int64_t bytes, MemoryKind kind) override;
  // Allocate outside the compute stream's order, for memory handed out while that stream is
  // being captured (capture_memory.h): the block comes from the pool on `side_stream`, which the
  // host waits for, so any stream may use it at once and no capture records the allocation.
  absl::StatusOr<void*> AllocateOffStream(int64_t bytes, MemoryKind kind, cudaStream_t side_stream);
  void Free(void* ptr, int64_t bytes, MemoryKind kind) override;
  void Recount(int64_t bytes, MemoryKind from, MemoryKind to) override;
  bool host_accessible() const override { return false; }

  MemoryTracker& memory() { return memory_; }

 private:
  // One cudaMallocFromPoolAsync on `stream`; cudaErrorMemoryAllocation comes back as is, to be
  // retried.
  cudaError_t TryAllocate(int64_t bytes, cudaStream_t stream, void** ptr);
  // Allocate's work on `stream`, which a retry after running out of memory waits for.
  absl::StatusOr<void*> AllocateOn(int64_t bytes, MemoryKind kind, cudaStream_t stream);
  std::string Describe(int64_t bytes, MemoryKind kind) const;

  const std::string label_;
  const cuda::MemPool pool_;
  const cudaStream_t stream_;
  const int64_t limit_bytes_;
  const Logger& logger_;
  MemoryTracker memory_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_MEMORY_POOL_H_
