// The oneDNN pieces both CPU product paths use (f32 in CpuMatmulOps, bf16 inputs in
// CpuBf16Gemm): the matmul primitive for C = alpha A B + beta C (+ bias) over given memory
// descriptors (alpha as output scale, beta as a sum post-op, the bias an f32 row of n), and the
// dnnl_sgemm loop for what the primitive does not serve. Internal to the CPU backend.
#ifndef GPIPE_RUNTIME_DEVICE_CPU_DNNL_MATMUL_H_
#define GPIPE_RUNTIME_DEVICE_CPU_DNNL_MATMUL_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "runtime/device/ops/matmul_ops.h"

namespace gpipe {

// The descriptor of `batch` matrices of logical shape [rows, cols] of `type` whose element (i, j)
// sits at i * row_stride + j * col_stride (a transpose swaps the two strides), matrix b at
// b * batch_stride. Throws dnnl::error for strides oneDNN cannot describe.
dnnl::memory::desc MatrixDesc(dnnl::memory::data_type type, int64_t batch, int64_t rows,
                              int64_t cols, int64_t row_stride, int64_t col_stride,
                              int64_t batch_stride);

// The f32 bias descriptor of n columns for `batch` products (broadcast over rows and batch).
dnnl::memory::desc MatmulBiasDesc(int64_t batch, int64_t n);

// The primitive, or nullopt when oneDNN offers only a reference implementation (far slower than
// sgemm) or cannot express the descriptors at all (e.g. a zero batch stride).
std::optional<dnnl::matmul> MakeMatmulPrimitive(const dnnl::memory::desc& a,
                                                const dnnl::memory::desc& b,
                                                const dnnl::memory::desc& c,
                                                const dnnl::memory::desc* bias, float alpha,
                                                float beta, const dnnl::engine& engine);

// One operand of SgemmBatches: matrix b of the batch starts at data + b * batch_stride, rows
// ld apart.
struct SgemmOperand {
  const float* data = nullptr;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

// For each b < options.batch: C_b = alpha op(A_b) op(B_b) + beta C_b with dnnl_sgemm, then the
// bias added to every row (the contract's order). `what` names the product in errors.
absl::Status SgemmBatches(const SgemmOperand& a, const SgemmOperand& b, float* c, int64_t c_ld,
                          int64_t c_batch_stride, const GemmOptions& options, int64_t m, int64_t n,
                          int64_t k, const std::string& what);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_DNNL_MATMUL_H_
