// CudaMatmulOps: MatmulOps (runtime/device/ops/matmul_ops.h) on the GPU, issued on the context's
// compute stream. Its product runs after MatmulOps::Gemm has checked the arguments.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_MATMUL_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_MATMUL_OPS_H_

#include "runtime/device/cuda/cuda_context.h"
#include "runtime/device/ops/matmul_ops.h"

namespace gpipe {

class CudaMatmulOps final : public MatmulOps {
 public:
  explicit CudaMatmulOps(const CudaContext& context) : context_(context) {}

 private:
  absl::Status DoGemm(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                      const GemmOptions& options) const override;

  // The stored matrices of `view` (batch of them) packed densely into a bf16 workspace tensor.
  absl::StatusOr<Tensor> Pack(const MatrixView& view, int64_t batch) const;

  const CudaContext& context_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_MATMUL_OPS_H_
