// MatmulOps: dense products, strided and batched, with alpha/beta and a bias epilogue (cuBLASLt
// and oneDNN shapes). Transposes and sub-matrices (a head's columns inside a wider row) are
// expressed by views, never by copies. See runtime/device/ops.h for the common contract.
// The public entry checks its arguments (ValidateGemm: the same INVALID_ARGUMENT on every
// backend) and then runs the backend's protected DoGemm.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_MATMUL_OPS_H_
#define GPIPE_RUNTIME_DEVICE_OPS_MATMUL_OPS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "runtime/core/tensor.h"
#include "runtime/device/ops/product_precision.h"

namespace gpipe {

// A row-major matrix, or `batch` of them, inside a tensor's storage: element (b, i, j) is
// tensor element offset + b * batch_stride + i * ld + j (in elements of the tensor's dtype).
// rows x cols is the stored matrix (before any transpose). ld >= cols.
struct MatrixView {
  Tensor tensor;
  int64_t offset = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

// The whole of `tensor` viewed as one [rows, cols] matrix (rows * cols == num_elements).
MatrixView WholeMatrix(const Tensor& tensor, int64_t rows, int64_t cols);

// "f32[2, 12] @ 3 [4 x 3, ld 12, batch stride 3]", for error messages.
std::string MatrixViewString(const MatrixView& view);

struct GemmOptions {
  bool transpose_a = false;
  bool transpose_b = false;
  float alpha = 1.0f;
  float beta = 0.0f;
  // Number of independent products (views advance by their batch_stride).
  int64_t batch = 1;
  // Optional f32 [n]: added to every row of the product (c = alpha op(a) op(b) + beta c + bias).
  const Tensor* bias = nullptr;
  // kBF16: A and B rounded to bf16, f32 accumulation (product_precision.h); alpha, beta and
  // the bias stay f32. At kBF16 A and B may also view bf16 tensors, which enter the product
  // as they are: nothing to round, and no packed copy where the backend reads the view in place
  // (CUDA). The result has the same bits as the f32 operands those bf16 values widen to.
  // C is f32, or at kBF16 with beta == 0 a bf16 view (mixed precision's storage): the f32 result
  // alpha op(A) op(B) + bias is rounded to nearest even into it, the bits an f32 C followed by a
  // Cast would hold, written without that f32 copy where the backend can.
  ProductPrecision precision = ProductPrecision::kF32;
};

// The checks MatmulOps::Gemm makes before any backend touches memory: views of defined tensors
// (A, B and C f32, or bf16 at ProductPrecision::kBF16, for C only with beta == 0), non-negative
// sizes, ld >= cols, matching m/n/k, every element of every batch inside its tensor, bias f32 [n].
// INVALID_ARGUMENT naming `op` and the views otherwise.
absl::Status ValidateGemm(const char* op, const MatrixView& a, const MatrixView& b,
                          const MatrixView& c, const GemmOptions& options);

class MatmulOps {
 public:
  virtual ~MatmulOps() = default;
  // For each b < batch: C_b = alpha op(A_b) op(B_b) + beta C_b (+ bias), op = transpose or not.
  // C_b is [m, n] with op(A_b) [m, k] and op(B_b) [k, n]; every view must stay inside its
  // tensor (ValidateGemm). With beta == 0, C is not read (NaNs in it do not propagate). k == 0
  // gives beta C (+ bias). C must not overlap A or B.
  absl::Status Gemm(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                    const GemmOptions& options) const;

 protected:
  // The backend's product, called only with arguments Gemm has checked (ValidateGemm).
  virtual absl::Status DoGemm(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                              const GemmOptions& options) const = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_MATMUL_OPS_H_
