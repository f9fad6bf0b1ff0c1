// CpuEmbeddingOps: the CPU backend's EmbeddingOps (see runtime/device/ops/embedding_ops.h for the
// contracts).
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_EMBEDDING_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_EMBEDDING_OPS_H_

#include "runtime/device/ops/embedding_ops.h"

namespace gpipe {

class CpuEmbeddingOps final : public EmbeddingOps {
 private:
  absl::Status DoGather(const Tensor& table, const Tensor& ids, Tensor& out) const override;
  absl::Status DoScatterAdd(const Tensor& ids, const Tensor& dout, Tensor& dtable) const override;
  absl::Status DoAddRowBroadcast(const Tensor& in, const Tensor& row, int64_t n,
                                 Tensor& out) const override;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_EMBEDDING_OPS_H_
