// CudaMatmulOps: MatmulOps (runtime/device/ops/matmul_ops.h) on the GPU, issued on the context's
// compute stream. Its product runs after MatmulOps::Gemm has checked the arguments.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_MATMUL_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_MATMUL_OPS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/core/tensor.h"
#include "runtime/device/cuda/cublaslt_gemm.h"
#include "runtime/device/cuda/cuda_context.h"
#include "runtime/device/ops/matmul_ops.h"

namespace gpipe {

class CudaMatmulOps final : public MatmulOps {
 public:
  explicit CudaMatmulOps(const CudaContext& context) : context_(context), lt_(context) {}

 private:
  absl::Status DoGemm(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                      const GemmOptions& options) const override;

  // A bf16 C: the f32 product into a dense f32 workspace (the cuBLAS call an f32 C of the same
  // dense layout gets, so the same bits; for a strided C cuBLAS may choose another kernel), then
  // one kernel adds the bias and rounds into C's view.
  absl::Status GemmIntoBf16(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                            const GemmOptions& options) const;

  // A product's operand as cuBLAS reads it: at kBF16 a bf16 view in place, an f32 one packed;
  // at kF32 the f32 view itself.
  struct Bf16Operand {
    Tensor packed;               // the workspace copy of an f32 view; undefined for a bf16 one
    const void* data = nullptr;  // the first matrix's first element
    int64_t ld = 0;
    int64_t batch_stride = 0;
  };
  absl::StatusOr<Bf16Operand> Bf16OperandOf(const MatrixView& view, int64_t batch) const;
  // The stored matrices of `view` (batch of them) packed densely into a bf16 workspace tensor.
  absl::StatusOr<Tensor> Pack(const MatrixView& view, int64_t batch) const;

  const CudaContext& context_;
  // Products under runtime.cuda.cublaslt_gemm, each shape's algorithm pinned.
  cuda::CublasLtGemm lt_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_MATMUL_OPS_H_
