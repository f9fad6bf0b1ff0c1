// Row-major products on cuBLAS (column-major): a row-major matrix with leading dimension ld is
// its transpose in column-major with the same ld, so C = op(A) op(B) is computed as
// C^T = op(B)^T op(A)^T: cuBLAS gets B first with op = transpose_b, then A with op =
// transpose_a, and m and n swap. Views keep their offsets, leading dimensions and batch strides;
// nothing is copied. cuBLAS returns the same bits on every run on the same GPU model; TF32 is
// used only when the handle's math mode allows it (runtime.cuda.allow_tf32, set by the device).
// At ProductPrecision::kBF16, f32 A and B are first packed into dense bf16 copies (workspace),
// bf16 ones are read in place through their views, and the product runs on bf16 tensor cores with
// f32 accumulation into the f32 C; a bf16 C gets that f32 product (workspace) rounded by one
// kernel that also adds the bias.
// With runtime.cuda.cublaslt_gemm, products run on cuBLASLt instead (cublaslt_gemm.h): the bias
// is added, and a bf16 C rounded, in the product's epilogue, one algorithm pinned per shape;
// shapes cuBLASLt has no algorithm for take the path above.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/bf16_elements.cuh"
#include "runtime/device/cuda/cuda_matmul_ops.h"
#include "runtime/device/cuda/cuda_status.h"
#include "runtime/device/cuda/device_pointer.h"
#include "runtime/device/cuda/kernel_launch.h"

namespace gpipe {
namespace {

// c[b, i, j] = beta c[b, i, j] (0 when beta == 0, so NaNs in c do not propagate) + bias[j]
// (when given), as the CPU backend does for k == 0.
__global__ void ScaleAndAddBiasKernel(float* c, int64_t rows, int64_t cols, int64_t ld,
                                      int64_t batch_stride, int64_t batch, float beta,
                                      const float* bias) {
  const int64_t total = batch * rows * cols;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t j = e % cols;
    const int64_t i = (e / cols) % rows;
    const int64_t b = e / (cols * rows);
    float& value = c[b * batch_stride + i * ld + j];
    const float scaled = beta == 0.0f ? 0.0f : beta * value;
    value = bias != nullptr ? scaled + bias[j] : scaled;
  }
}

// Row-wise kernels run on a 2-D grid: y over the batch's rows (b * rows + i), x over a row's
// columns, so an element's place costs one division per row instead of three per element.
dim3 RowGrid(int64_t matrix_rows, int64_t cols) {
  return dim3(cuda::BlocksFor(cols, cuda::kThreadsPerBlock, 64),
              static_cast<unsigned>(std::min<int64_t>(matrix_rows, 65535)));
}

// c[b, i, j] += bias[j], after the product (the CPU backend's order).
__global__ void AddBiasKernel(float* c, int64_t rows, int64_t cols, int64_t ld,
                              int64_t batch_stride, int64_t batch, const float* bias) {
  for (int64_t r = blockIdx.y; r < batch * rows; r += gridDim.y) {
    const int64_t b = r / rows;
    float* row = c + b * batch_stride + (r - b * rows) * ld;
    for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < cols;
         j += int64_t{gridDim.x} * blockDim.x) {
      row[j] += bias[j];
    }
  }
}

// c[b, i, j] = bf16(wide[b, i, j] + bias[j]) (round to nearest even; the bias when given): a
// bf16 C from the dense f32 product, in the order an f32 C adds its bias and a Cast rounds it.
__global__ void AddBiasRoundKernel(const float* wide, int64_t rows, int64_t cols, int64_t batch,
                                   const float* bias, uint16_t* c, int64_t ld,
                                   int64_t batch_stride) {
  for (int64_t r = blockIdx.y; r < batch * rows; r += gridDim.y) {
    const int64_t b = r / rows;
    const float* from = wide + r * cols;
    uint16_t* to = c + b * batch_stride + (r - b * rows) * ld;
    for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < cols;
         j += int64_t{gridDim.x} * blockDim.x) {
      const float value = bias != nullptr ? from[j] + bias[j] : from[j];
      to[j] = cuda::ToBf16(__float_as_uint(value));
    }
  }
}

const float* ViewPointer(const MatrixView& view) {
  return DevicePointer<float>(view.tensor) + view.offset;
}

// packed[b, i, j] = bf16(view[b, i, j]) (round to nearest even), dense: the stored matrices of
// a view, for ProductPrecision::kBF16.
__global__ void PackBf16Kernel(const float* view, int64_t rows, int64_t cols, int64_t ld,
                               int64_t batch_stride, int64_t batch, __nv_bfloat16* packed) {
  for (int64_t r = blockIdx.y; r < batch * rows; r += gridDim.y) {
    const int64_t b = r / rows;
    const float* row = view + b * batch_stride + (r - b * rows) * ld;
    __nv_bfloat16* out = packed + r * cols;
    for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < cols;
         j += int64_t{gridDim.x} * blockDim.x) {
      out[j] = __float2bfloat16_rn(row[j]);
    }
  }
}

}  // namespace

absl::StatusOr<CudaMatmulOps::Bf16Operand> CudaMatmulOps::Bf16OperandOf(const MatrixView& view,
                                                                        int64_t batch) const {
  if (view.tensor.dtype() == DType::kBF16) {
    // Read in place: the view's own leading dimension and batch stride.
    return Bf16Operand{.data = static_cast<const __nv_bfloat16*>(view.tensor.raw_data()) +
                               view.offset,  // elements of the view's bf16 tensor
                       .ld = view.ld,
                       .batch_stride = view.batch_stride};
  }
  ASSIGN_OR_RETURN(Tensor packed, Pack(view, batch));
  const void* data = packed.raw_data();
  return Bf16Operand{.packed = std::move(packed),
                     .data = data,
                     .ld = view.cols,
                     .batch_stride = view.rows * view.cols};
}

absl::StatusOr<Tensor> CudaMatmulOps::Pack(const MatrixView& view, int64_t batch) const {
  const int64_t total = batch * view.rows * view.cols;
  ASSIGN_OR_RETURN(Tensor packed, Tensor::Empty(*context_.workspace, Shape{total}, DType::kBF16,
                                                MemoryKind::kWorkspace));
  PackBf16Kernel<<<RowGrid(batch * view.rows, view.cols), cuda::kThreadsPerBlock, 0,
                   context_.stream>>>(
      ViewPointer(view), view.rows, view.cols, view.ld, view.batch_stride, batch,
      static_cast<__nv_bfloat16*>(packed.raw_data()));
  RETURN_IF_ERROR(cuda::LaunchStatus("gemm bf16 packing"));
  return packed;
}

absl::Status CudaMatmulOps::GemmIntoBf16(const MatrixView& a, const MatrixView& b,
                                         const MatrixView& c, const GemmOptions& options) const {
  const int64_t m = c.rows;
  const int64_t n = c.cols;
  ASSIGN_OR_RETURN(Tensor wide, Tensor::Empty(*context_.workspace, Shape{options.batch * m * n},
                                              DType::kF32, MemoryKind::kWorkspace));
  GemmOptions product = options;
  product.bias = nullptr;  // added with the rounding, after the product as for an f32 C
  RETURN_IF_ERROR(DoGemm(
      a, b,
      MatrixView{.tensor = wide, .offset = 0, .rows = m, .cols = n, .ld = n, .batch_stride = m * n},
      product));
  AddBiasRoundKernel<<<RowGrid(options.batch * m, n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      DevicePointer<float>(wide), m, n, options.batch,
      options.bias != nullptr ? DevicePointer<float>(*options.bias) : nullptr,
      static_cast<uint16_t*>(Tensor(c.tensor).raw_data()) + c.offset, c.ld, c.batch_stride);
  return cuda::LaunchStatus("gemm bias and bf16 rounding");
}

absl::Status CudaMatmulOps::DoGemm(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                                   const GemmOptions& options) const {
  const int64_t m = c.rows;
  const int64_t n = c.cols;
  const int64_t k = options.transpose_a ? a.rows : a.cols;
  if (options.batch == 0 || m == 0 || n == 0) return absl::OkStatus();
  const bool bf16_c = c.tensor.dtype() == DType::kBF16;
  float* c_ptr = bf16_c ? nullptr : const_cast<float*>(ViewPointer(c));
  const float* bias = options.bias != nullptr ? DevicePointer<float>(*options.bias) : nullptr;
  const int64_t total = options.batch * m * n;
  if (k == 0) {
    if (bf16_c) return GemmIntoBf16(a, b, c, options);
    ScaleAndAddBiasKernel<<<cuda::BlocksFor(total), cuda::kThreadsPerBlock, 0, context_.stream>>>(
        c_ptr, m, n, c.ld, c.batch_stride, options.batch, options.beta, bias);
    return cuda::LaunchStatus("gemm scale (k = 0)");
  }
  if (bf16_c && !context_.cublaslt_gemm) return GemmIntoBf16(a, b, c, options);
  const float alpha = options.alpha;
  const float beta = options.beta;
  // The operands as the product reads them. At kBF16: bf16 copies of f32 A and B (rounded to
  // nearest even, as the CPU rounds), then bf16 tensor cores with f32 accumulation. cuBLAS's own
  // down-conversion (CUBLAS_COMPUTE_32F_FAST_16BF on the f32 operands) skips the copies but
  // does not round to nearest: on an H100 it erred by up to 1e-2 relative against the
  // rounded-input reference, so it is not used. bf16 operands skip the copy.
  const bool bf16 = options.precision == ProductPrecision::kBF16;
  Bf16Operand a16;
  Bf16Operand b16;
  if (bf16) {
    ASSIGN_OR_RETURN(a16, Bf16OperandOf(a, options.batch));
    ASSIGN_OR_RETURN(b16, Bf16OperandOf(b, options.batch));
  } else {
    a16 = {.data = ViewPointer(a), .ld = a.ld, .batch_stride = a.batch_stride};
    b16 = {.data = ViewPointer(b), .ld = b.ld, .batch_stride = b.batch_stride};
  }
  if (context_.cublaslt_gemm) {
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B first, m and n swapped.
    const cudaDataType_t operand_type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    // A row-major operand as cuBLASLt's column-major one: its transpose, rows and columns swapped.
    const auto column_major = [&](const MatrixView& view, const Bf16Operand& operand) {
      return cuda::LtMatrix{.data = operand.data,
                            .type = operand_type,
                            .rows = view.cols,
                            .cols = view.rows,
                            .ld = operand.ld,
                            .batch_stride = operand.batch_stride};
    };
    const cuda::LtGemmCall call{
        .transpose_a = options.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
        .transpose_b = options.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        .a = column_major(b, b16),
        .b = column_major(a, a16),
        .d = {.data =
                  bf16_c ? static_cast<const void*>(
                               static_cast<const uint16_t*>(Tensor(c.tensor).raw_data()) + c.offset)
                         : c_ptr,
              .type = bf16_c ? CUDA_R_16BF : CUDA_R_32F,
              .rows = n,
              .cols = m,
              .ld = c.ld,
              .batch_stride = c.batch_stride},
        .batch = options.batch,
        .alpha = alpha,
        .beta = beta,
        .bias = bias,
        .compute =
            !bf16 && context_.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    ASSIGN_OR_RETURN(const bool ran, lt_.Run(call));
    if (ran) return absl::OkStatus();
    // No cuBLASLt algorithm for the problem: the f32 product and the rounding kernel, or cuBLAS.
    if (bf16_c) return GemmIntoBf16(a, b, c, options);
  }
  if (bf16) {
    GPIPE_CUBLAS_RETURN_IF_ERROR(cublasGemmStridedBatchedEx_64(
        context_.cublas, options.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
        options.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b16.data, CUDA_R_16BF,
        b16.ld, b16.batch_stride, a16.data, CUDA_R_16BF, a16.ld, a16.batch_stride, &beta, c_ptr,
        CUDA_R_32F, c.ld, c.batch_stride, options.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else {
    GPIPE_CUBLAS_RETURN_IF_ERROR(cublasSgemmStridedBatched_64(
        context_.cublas, options.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
        options.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
        static_cast<const float*>(b16.data), b.ld, b.batch_stride,
        static_cast<const float*>(a16.data), a.ld, a.batch_stride, &beta, c_ptr, c.ld,
        c.batch_stride, options.batch));
  }
  if (bias == nullptr) return absl::OkStatus();
  AddBiasKernel<<<RowGrid(options.batch * m, n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      c_ptr, m, n, c.ld, c.batch_stride, options.batch, bias);
  return cuda::LaunchStatus("gemm bias");
}

}  // namespace gpipe
