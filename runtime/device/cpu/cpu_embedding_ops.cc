#include "runtime/device/cpu/cpu_embedding_ops.h"

namespace gpipe {

absl::Status CpuEmbeddingOps::Gather(const Tensor& table, const Tensor& ids, Tensor& out) const {
  return absl::UnimplementedError("CpuEmbeddingOps::Gather: scaffolding");
}

absl::Status CpuEmbeddingOps::ScatterAdd(const Tensor& ids, const Tensor& dout, Tensor& dtable) const {
  return absl::UnimplementedError("CpuEmbeddingOps::ScatterAdd: scaffolding");
}

absl::Status CpuEmbeddingOps::AddRowBroadcast(const Tensor& in, const Tensor& row, int64_t n, Tensor& out) const {
  return absl::UnimplementedError("CpuEmbeddingOps::AddRowBroadcast: scaffolding");
}

}  // namespace gpipe
