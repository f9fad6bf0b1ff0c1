// Argument checks of EmbeddingOps, shared by every backend so each says the same thing.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_EMBEDDING_CHECKS_H_
#define GPIPE_RUNTIME_DEVICE_OPS_EMBEDDING_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/core/tensor.h"
#include "runtime/device/ops/bad_id.h"

namespace gpipe::op_checks {

// Gather / ScatterAdd operands: table (or its gradient) f32 [rows, dim], ids i64 [n], data f32
// with n * dim elements. The ids' values are checked by the backend (they live on the device).
absl::Status EmbeddingRows(const char* op, const Tensor& table, const Tensor& ids,
                           const Tensor& data);
// The status for an id outside [0, rows): "index <r> has id <id>, outside [0, rows)" + BadId.
absl::Status EmbeddingBadId(BadId bad, int64_t rows);
// AddRowBroadcast operands.
absl::Status RowBroadcastArgs(const Tensor& in, const Tensor& row, int64_t n, const Tensor& out);

}  // namespace gpipe::op_checks

#endif  // GPIPE_RUNTIME_DEVICE_OPS_EMBEDDING_CHECKS_H_
