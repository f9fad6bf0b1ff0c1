// EmbeddingOps: row gather by id and its scatter-add gradient, and broadcast adds of a table
// slice (learned positions; their gradient is TensorOps::SumAccumulate). See
// runtime/device/ops.h for the common contract.
// Each public entry checks its arguments' shapes and dtypes (the same INVALID_ARGUMENT on every
// backend) and then runs the backend's protected Do kernel, which checks the ids' values (they
// live on the device). In training the data path has already checked them on the host, before
// their upload (Layer::CheckHostInput), so the kernels' check is a backstop.
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
  // A device that runs ops asynchronously (CUDA) may instead return OK and report that status
  // from its next call that waits for the device (Device::Synchronize, CopyToHost; the earliest
  // bad call's), checking on the device without a host wait; `out` is then unspecified, and
  // nothing outside it is read or written.
  absl::Status Gather(const Tensor& table, const Tensor& ids, Tensor& out) const;
  // dtable[ids[r], :] += dout[r, :], in order of r; ids out of range are rejected as by
  // Gather, before anything is added (or, reported later as by Gather, with dtable unspecified).
  absl::Status ScatterAdd(const Tensor& ids, const Tensor& dout, Tensor& dtable) const;
  // out[b, :] = in[b, :] + row[:] for in/out f32 viewed as [batch, n] (the same element
  // count, a multiple of n) and the first n elements of `row` (f32). out may be in.
  absl::Status AddRowBroadcast(const Tensor& in, const Tensor& row, int64_t n, Tensor& out) const;

 protected:
  // The backend's kernels, one per entry above, called only with operands the entry has
  // checked. DoGather and DoScatterAdd reject ids outside [0, rows) themselves, with
  // op_checks::EmbeddingBadId, before writing anything, or report it later as above.
  virtual absl::Status DoGather(const Tensor& table, const Tensor& ids, Tensor& out) const = 0;
  virtual absl::Status DoScatterAdd(const Tensor& ids, const Tensor& dout,
                                    Tensor& dtable) const = 0;
  virtual absl::Status DoAddRowBroadcast(const Tensor& in, const Tensor& row, int64_t n,
                                         Tensor& out) const = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_EMBEDDING_OPS_H_
