#include "runtime/device/ops/embedding_checks.h"

#include "absl/strings/str_cat.h"

namespace gpipe::op_checks {

absl::Status EmbeddingRows(const char* op, const Tensor& table, const Tensor& ids,
                           const Tensor& data) {
  if (!table.defined() || table.dtype() != DType::kF32 || table.shape().rank() != 2 ||
      !ids.defined() || ids.dtype() != DType::kI64 || !data.defined() ||
      data.dtype() != DType::kF32 ||
      data.num_elements() != ids.num_elements() * table.shape().dim(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("EmbeddingOps::", op, ": table ", table.DebugString(), ", ids ",
                     ids.DebugString(), " and rows ", data.DebugString(),
                     " do not fit (f32 [rows, dim], i64 [n], f32 with n * dim elements)"));
  }
  return absl::OkStatus();
}

absl::Status EmbeddingBadId(BadId bad, int64_t rows) {
  return BadIdError(
      absl::StrCat("index ", bad.index, " has id ", bad.id, ", outside [0, ", rows, ")"), bad);
}

absl::Status RowBroadcastArgs(const Tensor& in, const Tensor& row, int64_t n, const Tensor& out) {
  if (!in.defined() || !row.defined() || !out.defined() || in.dtype() != DType::kF32 ||
      row.dtype() != DType::kF32 || out.dtype() != DType::kF32 || n < 1 ||
      in.num_elements() % n != 0 || out.num_elements() != in.num_elements() ||
      row.num_elements() < n) {
    return absl::InvalidArgumentError(
        absl::StrCat("EmbeddingOps::AddRowBroadcast: in ", in.DebugString(), ", row ",
                     row.DebugString(), ", n ", n, ", out ", out.DebugString(),
                     " (f32 in/out of equal size, a multiple of n >= 1; row with >= n elements)"));
  }
  return absl::OkStatus();
}

}  // namespace gpipe::op_checks
