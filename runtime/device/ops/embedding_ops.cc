#include "runtime/device/ops/embedding_ops.h"

#include "runtime/core/status_macros.h"
#include "runtime/device/ops/embedding_checks.h"

namespace gpipe {

using op_checks::EmbeddingRows;
using op_checks::RowBroadcastArgs;

absl::Status EmbeddingOps::Gather(const Tensor& table, const Tensor& ids, Tensor& out) const {
  RETURN_IF_ERROR(EmbeddingRows("Gather", table, ids, out));
  return DoGather(table, ids, out);
}

absl::Status EmbeddingOps::ScatterAdd(const Tensor& ids, const Tensor& dout, Tensor& dtable) const {
  RETURN_IF_ERROR(EmbeddingRows("ScatterAdd", dtable, ids, dout));
  return DoScatterAdd(ids, dout, dtable);
}

absl::Status EmbeddingOps::AddRowBroadcast(const Tensor& in, const Tensor& row, int64_t n,
                                           Tensor& out) const {
  RETURN_IF_ERROR(RowBroadcastArgs(in, row, n, out));
  return DoAddRowBroadcast(in, row, n, out);
}

}  // namespace gpipe
