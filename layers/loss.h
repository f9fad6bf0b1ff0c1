// Loss: turns the last layer's output and the targets into a scalar and its gradient.
//
// Losses are means over the whole mini-batch, however it is split into micro-batches: a call on
// one micro-batch adds sum_i(loss_i) / global_batch into device totals (and returns the matching
// gradient), so the totals after every micro-batch hold the mini-batch mean that single-device
// training computes. The host reads the totals once per step, never per micro-batch.
#ifndef GPIPE_LAYERS_LOSS_H_
#define GPIPE_LAYERS_LOSS_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/core/dtype.h"
#include "runtime/core/shape.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"
#include "runtime/device/ops/loss_ops.h"

namespace gpipe {

class Loss {
 public:
  virtual ~Loss() = default;
  virtual std::string_view type() const = 0;
  // Per-sample target shape and dtype for a model output of per-sample shape `output_shape`.
  virtual DType target_dtype() const = 0;
  virtual Shape target_shape(const Shape& output_shape) const = 0;
  // Checks that the loss can consume outputs of this per-sample shape.
  virtual absl::Status ValidateOutputShape(const Shape& output_shape) const = 0;
  // output: [b, ...]; targets: [b, target_shape...]. global_batch: the mini-batch size.
  // Adds this micro-batch's share of the mini-batch mean into totals (f64 [kLossTotalsSize]
  // on the device, see runtime/device/ops/loss_ops.h): [kLossSum] += loss,
  // [kLossCorrect] += correct argmax predictions (classification only). Returns dL/doutput.
  virtual absl::StatusOr<Tensor> Compute(Device& device, const Tensor& output,
                                         const Tensor& targets, int64_t global_batch,
                                         Tensor& totals) const = 0;
  // Checks a micro-batch of targets on the host, before they are uploaded (the data path,
  // runtime/exec/stage_compute.cc), so nothing on the device waits for the host to learn of a bad
  // target: class ids outside [0, classes) get the error Compute would give. `output_shape` is
  // the model's per-sample output shape; `targets` host-accessible [batch, target_shape...].
  // Losses without ids accept anything.
  virtual absl::Status CheckHostTargets(const Shape& output_shape, const Tensor& targets) const {
    return absl::OkStatus();
  }
  // Whether totals[kLossCorrect] counts predictions (classification losses).
  virtual bool counts_correct() const = 0;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_LOSS_H_
