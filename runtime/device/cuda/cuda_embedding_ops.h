// CudaEmbeddingOps: EmbeddingOps (runtime/device/ops/embedding_ops.h) on the GPU, issued on the
// context's compute stream. Its kernels run after EmbeddingOps' entries have checked their
// operands; the ids' values are checked here (id_check.h), before any launch that uses them.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_EMBEDDING_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_EMBEDDING_OPS_H_

#include "runtime/device/cuda/cuda_context.h"
#include "runtime/device/ops/embedding_ops.h"

namespace gpipe {

class CudaEmbeddingOps final : public EmbeddingOps {
 public:
  explicit CudaEmbeddingOps(const CudaContext& context) : context_(context) {}

 private:
  absl::Status DoGather(const Tensor& table, const Tensor& ids, Tensor& out) const override;
  absl::Status DoScatterAdd(const Tensor& ids, const Tensor& dout, Tensor& dtable) const override;
  absl::Status DoAddRowBroadcast(const Tensor& in, const Tensor& row, int64_t n,
                                 Tensor& out) const override;

  const CudaContext& context_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_EMBEDDING_OPS_H_
