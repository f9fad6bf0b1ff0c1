#include "runtime/device/cpu/cpu_embedding_ops.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// Checks the operands shared by Gather and ScatterAdd: table (or its gradient) f32 [rows, dim],
// ids i64, rows-of-dim f32 data with ids.num_elements() * dim elements; then every id.
absl::Status CheckRows(const char* op, const Tensor& table, const Tensor& ids, const Tensor& data) {
  if (!table.defined() || table.dtype() != DType::kF32 || table.shape().rank() != 2 ||
      !ids.defined() || ids.dtype() != DType::kI64 || !data.defined() ||
      data.dtype() != DType::kF32 ||
      data.num_elements() != ids.num_elements() * table.shape().dim(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("EmbeddingOps::", op, ": table ", table.DebugString(), ", ids ",
                     ids.DebugString(), " and rows ", data.DebugString(),
                     " do not fit (f32 [rows, dim], i64 [n], f32 with n * dim elements)"));
  }
  const int64_t rows = table.shape().dim(0);
  const int64_t* id = ids.data<int64_t>();
  const int64_t n = ids.num_elements();
  for (int64_t r = 0; r < n; ++r) {
    if (id[r] < 0 || id[r] >= rows) {
      return BadIdError(absl::StrCat("index ", r, " has id ", id[r], ", outside [0, ", rows, ")"),
                        BadId{.index = r, .id = id[r]});
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CpuEmbeddingOps::Gather(const Tensor& table, const Tensor& ids, Tensor& out) const {
  RETURN_IF_ERROR(CheckRows("Gather", table, ids, out));
  const int64_t dim = table.shape().dim(1);
  const float* source = table.f32();
  const int64_t* id = ids.data<int64_t>();
  float* __restrict y = out.f32();
  const int64_t n = ids.num_elements();
  for (int64_t r = 0; r < n; ++r) {
    const float* __restrict row = source + id[r] * dim;
    float* __restrict target = y + r * dim;
    for (int64_t i = 0; i < dim; ++i) target[i] = row[i];
  }
  return absl::OkStatus();
}

absl::Status CpuEmbeddingOps::ScatterAdd(const Tensor& ids, const Tensor& dout,
                                         Tensor& dtable) const {
  RETURN_IF_ERROR(CheckRows("ScatterAdd", dtable, ids, dout));
  const int64_t dim = dtable.shape().dim(1);
  const int64_t* id = ids.data<int64_t>();
  const float* g = dout.f32();
  float* table = dtable.f32();
  const int64_t n = ids.num_elements();
  // In order of r: rows sharing an id add up in the same order every time.
  for (int64_t r = 0; r < n; ++r) {
    float* __restrict row = table + id[r] * dim;
    const float* __restrict gr = g + r * dim;
    for (int64_t i = 0; i < dim; ++i) row[i] += gr[i];
  }
  return absl::OkStatus();
}

absl::Status CpuEmbeddingOps::AddRowBroadcast(const Tensor& in, const Tensor& row, int64_t n,
                                              Tensor& out) const {
  if (!in.defined() || !row.defined() || !out.defined() || in.dtype() != DType::kF32 ||
      row.dtype() != DType::kF32 || out.dtype() != DType::kF32 || n < 1 ||
      in.num_elements() % n != 0 || out.num_elements() != in.num_elements() ||
      row.num_elements() < n) {
    return absl::InvalidArgumentError(
        absl::StrCat("EmbeddingOps::AddRowBroadcast: in ", in.DebugString(), ", row ",
                     row.DebugString(), ", n ", n, ", out ", out.DebugString(),
                     " (f32 in/out of equal size, a multiple of n >= 1; row with >= n elements)"));
  }
  const int64_t batch = in.num_elements() / n;
  // No __restrict on in/out: out may be in.
  const float* x = in.f32();
  const float* __restrict r = row.f32();
  float* y = out.f32();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < n; ++i) y[b * n + i] = x[b * n + i] + r[i];
  }
  return absl::OkStatus();
}

}  // namespace gpipe
