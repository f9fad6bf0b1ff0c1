// Argument checks of LossOps, shared by every backend so each says the same thing.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_LOSS_CHECKS_H_
#define GPIPE_RUNTIME_DEVICE_OPS_LOSS_CHECKS_H_

#include "absl/status/status.h"
#include "runtime/core/tensor.h"
#include "runtime/device/ops/bad_id.h"

namespace gpipe::op_checks {

// totals is f64 [kLossTotalsSize].
absl::Status LossTotals(const char* op, const Tensor& totals);
// logits f32 [..., classes >= 1], ids i64 with one id per row, grad f32 like the logits.
absl::Status CrossEntropyArgs(const Tensor& logits, const Tensor& ids, const Tensor& grad);
// The status for a class id outside [0, classes): "row <r> has class id <id>, outside
// [0, classes)" + BadId.
absl::Status CrossEntropyBadId(BadId bad, int64_t classes);
// output, targets and grad f32 with the same element count.
absl::Status MeanSquaredErrorArgs(const Tensor& output, const Tensor& targets, const Tensor& grad);

}  // namespace gpipe::op_checks

#endif  // GPIPE_RUNTIME_DEVICE_OPS_LOSS_CHECKS_H_
