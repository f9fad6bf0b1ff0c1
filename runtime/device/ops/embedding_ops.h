// EmbeddingOps: row gather by id and its scatter-add gradient, and broadcast adds of a table
// slice (learned positions; their gradient is TensorOps::SumAccumulate). See
// runtime/device/ops.h for the common contract.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_EMBEDDING_OPS_H_
#define GPIPE_RUNTIME_DEVICE_OPS_EMBEDDING_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/core/tensor.h"
#include "runtime/device/ops/bad_id.h"

namespace gpipe {

class EmbeddingOps {
 public:
  virtual ~EmbeddingOps() = default;
  // out[r, :] = table[ids[r], :] for ids (i64, n entries), table f32 [rows, dim], out f32
  // [n, dim]. An id outside [0, rows) is INVALID_ARGUMENT whose message starts with
  // "index <r> has id <id>" and which carries BadId{r, id} (bad_id.h) for the first such r,
  // so the caller can say which sample and position that is; `out` is then left unwritten.
  virtual absl::Status Gather(const Tensor& table, const Tensor& ids, Tensor& out) const = 0;
  // dtable[ids[r], :] += dout[r, :], in order of r; ids out of range are rejected as by
  // Gather, before anything is added.
  virtual absl::Status ScatterAdd(const Tensor& ids, const Tensor& dout, Tensor& dtable) const = 0;
  // out[b, :] = in[b, :] + row[:] for in/out f32 viewed as [batch, n] (the same element
  // count, a multiple of n) and the first n elements of `row` (f32). out may be in.
  virtual absl::Status AddRowBroadcast(const Tensor& in, const Tensor& row, int64_t n,
                                       Tensor& out) const = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_EMBEDDING_OPS_H_
