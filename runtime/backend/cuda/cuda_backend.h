// The CUDA backend: a CudaDevice on the GPU gpu_selection.h picks for this rank (node-local rank
// % visible GPUs; runtime.cuda.share_gpu allows more ranks than GPUs, runtime.cuda.allow_tf32
// TF32 GEMMs and convolutions, runtime.memory_limit_bytes a budget), the data set as opened
// (the executor gathers micro-batches into the device's host staging memory and copies them
// over), boundary tensors over an MpiDataChannel behind a HostStagedDataChannel
// (runtime.transport: MPI) or an NcclDataChannel (NCCL), chunks as built.
#ifndef GPIPE_RUNTIME_BACKEND_CUDA_CUDA_BACKEND_H_
#define GPIPE_RUNTIME_BACKEND_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/backend/backend.h"

namespace gpipe {

// Collective over context.world (finding the ranks of this node): every rank calls it at the
// same point. FAILED_PRECONDITION, on every rank of the node alike, when this rank has no GPU.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const pb::Runtime& runtime,
                                                           const BackendContext& context);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_BACKEND_CUDA_CUDA_BACKEND_H_
