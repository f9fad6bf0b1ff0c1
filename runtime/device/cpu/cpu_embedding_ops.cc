#include "runtime/device/cpu/cpu_embedding_ops.h"

#include <cstdint>
#include <optional>
#include <span>

#include "runtime/core/status_macros.h"
#include "runtime/device/ops/embedding_checks.h"

namespace gpipe {
namespace {

// Every id is in [0, rows) of `table` (the operands' shapes are checked by the entries).
absl::Status CheckIds(const Tensor& table, const Tensor& ids) {
  const int64_t rows = table.shape().dim(0);
  const std::optional<BadId> bad =
      FirstIdOutside(std::span<const int64_t>(ids.data<int64_t>(), ids.num_elements()), rows);
  return bad.has_value() ? op_checks::EmbeddingBadId(*bad, rows) : absl::OkStatus();
}

}  // namespace

absl::Status CpuEmbeddingOps::DoGather(const Tensor& table, const Tensor& ids, Tensor& out) const {
  RETURN_IF_ERROR(CheckIds(table, ids));
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

absl::Status CpuEmbeddingOps::DoScatterAdd(const Tensor& ids, const Tensor& dout,
                                           Tensor& dtable) const {
  RETURN_IF_ERROR(CheckIds(dtable, ids));
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

absl::Status CpuEmbeddingOps::DoAddRowBroadcast(const Tensor& in, const Tensor& row, int64_t n,
                                                Tensor& out) const {
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
