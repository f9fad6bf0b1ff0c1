// LossOps: losses and their gradients in one pass, with the loss added into a device scalar
// the host reads once per step (never a host sync per micro-batch). See runtime/device/ops.h
// for the common contract.
// Each public entry checks its arguments' shapes and dtypes (the same INVALID_ARGUMENT on every
// backend) and then runs the backend's protected Do kernel, which checks the class ids' values
// (they live on the device). In training the data path has already checked them on the host,
// before their upload (Loss::CheckHostTargets), so the kernels' check is a backstop.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_LOSS_OPS_H_
#define GPIPE_RUNTIME_DEVICE_OPS_LOSS_OPS_H_

#include "absl/status/status.h"
#include "runtime/core/tensor.h"
#include "runtime/device/ops/bad_id.h"

namespace gpipe {

// Per-step accumulators of a loss, on the device: f64 [kLossTotalsSize].
enum LossTotalsIndex { kLossSum = 0, kLossCorrect = 1, kLossTotalsSize = 2 };

class LossOps {
 public:
  virtual ~LossOps() = default;
  // logits f32 [..., classes] viewed as [rows, classes], ids i64 with `rows` elements, grad
  // shaped like logits, totals f64 [kLossTotalsSize]. Per row (log-sum-exp shifted by the row
  // maximum, in double): loss = lse - logit[id]; grad = (softmax - onehot) * scale (f32,
  // overwritten). totals[kLossSum] += scale * sum of row losses (summed in double in row
  // order); totals[kLossCorrect] += rows whose argmax (lowest index on ties) is the id.
  // An id outside [0, classes) is INVALID_ARGUMENT starting "row <r> has class id <id>" and
  // carrying BadId{r, id} (bad_id.h) for the first such r; nothing is written then. A device
  // that runs ops asynchronously (CUDA) may instead report it from its next wait, as
  // EmbeddingOps::Gather says; grad and totals are then unspecified.
  absl::Status SoftmaxCrossEntropy(const Tensor& logits, const Tensor& ids, double scale,
                                   Tensor& grad, Tensor& totals) const;
  // output, targets f32 (same element count): diff = output - target in double;
  // grad = 2 diff scale (f32); totals[kLossSum] += scale * sum of diff^2 (summed in double in
  // element order, scaled once).
  absl::Status MeanSquaredError(const Tensor& output, const Tensor& targets, double scale,
                                Tensor& grad, Tensor& totals) const;

 protected:
  // The backend's kernels, one per entry above, called only with operands the entry has
  // checked. DoSoftmaxCrossEntropy rejects class ids outside [0, classes) itself, with
  // op_checks::CrossEntropyBadId, before writing anything, or report it later as above.
  virtual absl::Status DoSoftmaxCrossEntropy(const Tensor& logits, const Tensor& ids, double scale,
                                             Tensor& grad, Tensor& totals) const = 0;
  virtual absl::Status DoMeanSquaredError(const Tensor& output, const Tensor& targets, double scale,
                                          Tensor& grad, Tensor& totals) const = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_LOSS_OPS_H_
