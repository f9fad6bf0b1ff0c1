// Loss: turns the last layer's output and the targets into a scalar and its gradient.
//
// Losses are means over the whole mini-batch, however it is split into micro-batches: a call on
// one micro-batch returns sum_i(loss_i) / global_batch (and the matching gradient), so the sum
// over micro-batches equals the mini-batch mean that single-device training computes.
#ifndef GPIPE_LAYERS_LOSS_H_
#define GPIPE_LAYERS_LOSS_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/core/dtype.h"
#include "runtime/core/shape.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"

namespace gpipe {

struct LossResult {
  double loss = 0.0;     // this micro-batch's share of the mini-batch mean
  Tensor grad;           // dL/doutput, shaped like the output
  int64_t correct = -1;  // correct argmax predictions (classification), -1 otherwise
};

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
  virtual absl::StatusOr<LossResult> Compute(Device& device, const Tensor& output,
                                             const Tensor& targets, int64_t global_batch) const = 0;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_LOSS_H_
