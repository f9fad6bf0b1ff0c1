#include "layers/dense.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {
namespace {

// Whole-tensor views must cover their tensors exactly: a mismatch is a caller's shape error,
// reported here with the dense shapes rather than as an out-of-bounds view.
absl::Status CheckMatrix(const char* op, const char* what, const Tensor& tensor, int64_t rows,
                         int64_t cols) {
  if (!tensor.defined() || tensor.num_elements() != rows * cols) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", what, " must hold [", rows, ", ", cols, "] elements, got ",
                     tensor.defined() ? tensor.DebugString() : "undefined"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DenseForward(Device& device, const Tensor& in, int64_t rows, int64_t k,
                          const Tensor& weight, const Tensor* bias, int64_t n, Tensor& out,
                          ProductPrecision precision) {
  constexpr char kOp[] = "DenseForward";
  RETURN_IF_ERROR(CheckMatrix(kOp, "input", in, rows, k));
  RETURN_IF_ERROR(CheckMatrix(kOp, "weight", weight, n, k));
  RETURN_IF_ERROR(CheckMatrix(kOp, "output", out, rows, n));
  return device.ops().matmul.Gemm(WholeMatrix(in, rows, k), WholeMatrix(weight, n, k),
                                  WholeMatrix(out, rows, n),
                                  {.transpose_b = true, .bias = bias, .precision = precision});
}

absl::Status DenseParamGrads(Device& device, const Tensor& in, const Tensor& dout, int64_t rows,
                             int64_t k, int64_t n, Tensor& dweight, Tensor* dbias,
                             ProductPrecision precision) {
  constexpr char kOp[] = "DenseParamGrads";
  RETURN_IF_ERROR(CheckMatrix(kOp, "input", in, rows, k));
  RETURN_IF_ERROR(CheckMatrix(kOp, "output gradient", dout, rows, n));
  RETURN_IF_ERROR(CheckMatrix(kOp, "weight gradient", dweight, n, k));
  RETURN_IF_ERROR(device.ops().matmul.Gemm(
      WholeMatrix(dout, rows, n), WholeMatrix(in, rows, k), WholeMatrix(dweight, n, k),
      {.transpose_a = true, .beta = 1.0f, .precision = precision}));
  if (dbias == nullptr) return absl::OkStatus();
  return device.ops().tensor.SumAccumulate(dout, rows, n, 1, *dbias);
}

absl::Status DenseInputGrad(Device& device, const Tensor& dout, int64_t rows, int64_t n,
                            const Tensor& weight, int64_t k, Tensor& din,
                            ProductPrecision precision) {
  constexpr char kOp[] = "DenseInputGrad";
  RETURN_IF_ERROR(CheckMatrix(kOp, "output gradient", dout, rows, n));
  RETURN_IF_ERROR(CheckMatrix(kOp, "weight", weight, n, k));
  RETURN_IF_ERROR(CheckMatrix(kOp, "input gradient", din, rows, k));
  return device.ops().matmul.Gemm(WholeMatrix(dout, rows, n), WholeMatrix(weight, n, k),
                                  WholeMatrix(din, rows, k), {.precision = precision});
}

}  // namespace gpipe
