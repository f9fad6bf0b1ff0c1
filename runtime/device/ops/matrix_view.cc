#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/device/ops/matmul_ops.h"

namespace gpipe {

MatrixView WholeMatrix(const Tensor& tensor, int64_t rows, int64_t cols) {
  return MatrixView{.tensor = tensor, .offset = 0, .rows = rows, .cols = cols, .ld = cols};
}

std::string MatrixViewString(const MatrixView& view) {
  return absl::StrCat(view.tensor.defined() ? view.tensor.DebugString() : "undefined", " @ ",
                      view.offset, " [", view.rows, " x ", view.cols, ", ld ", view.ld,
                      ", batch stride ", view.batch_stride, "]");
}

namespace {

// Whether `view` is of a defined tensor of an accepted dtype (f32, or bf16 where `bf16` allows
// it) and every element of `batch` matrices lies inside it.
absl::Status CheckView(const char* op, const char* which, const MatrixView& view, int64_t batch,
                       bool bf16) {
  const Tensor& t = view.tensor;
  if (!t.defined() || !(t.dtype() == DType::kF32 || (bf16 && t.dtype() == DType::kBF16))) {
    const bool bf16_refused = t.defined() && t.dtype() == DType::kBF16;
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", which, " must view a defined f32", bf16 ? " or bf16" : "",
                     " tensor, got ", MatrixViewString(view),
                     bf16_refused ? " (a bf16 view needs ProductPrecision::kBF16)" : ""));
  }
  if (view.rows < 0 || view.cols < 0 || view.offset < 0 || view.batch_stride < 0 ||
      view.ld < view.cols) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", which,
        " has a negative size, offset or stride, or ld < cols: ", MatrixViewString(view)));
  }
  if (batch == 0 || view.rows == 0 || view.cols == 0) return absl::OkStatus();
  // Sizes are bounded by the tensor, so the products below cannot overflow once each factor is.
  const int64_t n = t.num_elements();
  if (view.offset >= n || view.rows > n || view.ld > n || view.batch_stride > n || batch > n) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", which, " ", MatrixViewString(view),
                                                   " x ", batch, " leaves its tensor"));
  }
  const int64_t last =
      view.offset + (batch - 1) * view.batch_stride + (view.rows - 1) * view.ld + view.cols - 1;
  if (last >= n) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", which, " ", MatrixViewString(view),
                                                   " x ", batch, " leaves its tensor"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGemm(const char* op, const MatrixView& a, const MatrixView& b,
                          const MatrixView& c, const GemmOptions& options) {
  if (options.batch < 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": negative batch ", options.batch));
  }
  const bool bf16_operands = options.precision == ProductPrecision::kBF16;
  for (auto [which, view] :
       {std::pair<const char*, const MatrixView*>{"A", &a}, {"B", &b}, {"C", &c}}) {
    if (absl::Status s = CheckView(op, which, *view, options.batch, bf16_operands); !s.ok()) {
      return s;
    }
  }
  if (c.tensor.dtype() == DType::kBF16 && options.beta != 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": a bf16 C is written, not accumulated into: beta must be 0, got ",
                     options.beta, " (C ", MatrixViewString(c), ")"));
  }
  const int64_t m = options.transpose_a ? a.cols : a.rows;
  const int64_t k = options.transpose_a ? a.rows : a.cols;
  const int64_t kb = options.transpose_b ? b.cols : b.rows;
  const int64_t n = options.transpose_b ? b.rows : b.cols;
  if (k != kb || c.rows != m || c.cols != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": op(A) [", m, ", ", k, "] op(B) [", kb, ", ", n, "] does not give C [",
                     c.rows, ", ", c.cols, "] (A ", MatrixViewString(a),
                     options.transpose_a ? " transposed" : "", ", B ", MatrixViewString(b),
                     options.transpose_b ? " transposed" : "", ", C ", MatrixViewString(c), ")"));
  }
  if (options.bias != nullptr) {
    const Tensor& bias = *options.bias;
    if (!bias.defined() || bias.dtype() != DType::kF32 || bias.num_elements() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": bias must be f32 with n = ", n, " elements, got ",
                       bias.defined() ? bias.DebugString() : "undefined"));
    }
  }
  return absl::OkStatus();
}

}  // namespace gpipe
