// OptimizerOps: one parameter tensor's update under PyTorch's rules (torch.optim.SGD, Adam,
// AdamW, single-tensor form), element-wise in float with hyperparameters rounded to float once
// by the caller. See runtime/device/ops.h for the common contract.
// Each public entry checks its arguments (the same INVALID_ARGUMENT on every backend) and then
// runs the backend's protected Do kernel.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_OPTIMIZER_OPS_H_
#define GPIPE_RUNTIME_DEVICE_OPS_OPTIMIZER_OPS_H_

#include "absl/status/status.h"
#include "runtime/core/tensor.h"

namespace gpipe {

struct SgdUpdate {
  float neg_lr = 0.0f;
  float weight_decay = 0.0f;
  float momentum = 0.0f;  // 0: no momentum buffer
  float one_minus_dampening = 1.0f;
  bool nesterov = false;
  bool first_step = false;  // the buffer is set to g rather than updated
};

struct AdamUpdate {
  float neg_step_size = 0.0f;  // -lr / (1 - beta1^t)
  float bias_correction2_sqrt = 1.0f;
  float eps = 1e-8f;
  float lerp_weight = 0.1f;  // 1 - beta1
  float beta2 = 0.999f;
  float one_minus_beta2 = 0.001f;
  float l2 = 0.0f;               // Adam's weight decay (added to the gradient)
  float decoupled_scale = 1.0f;  // AdamW's p *= 1 - lr * wd (1: none)
};

class OptimizerOps {
 public:
  virtual ~OptimizerOps() = default;
  // Per element, in float: g = grad + wd p; buf = g (first step) | buf momentum +
  // (1 - dampening) g; g = g + momentum buf (nesterov) | buf; p = p + (-lr) g.
  // momentum_buffer is undefined when u.momentum == 0.
  absl::Status Sgd(const SgdUpdate& u, Tensor& param, const Tensor& grad,
                   Tensor& momentum_buffer) const;
  // Per element, in float: p *= decoupled_scale (AdamW) or g = grad + l2 p (Adam);
  // m = lerp(m, g, lerp_weight); v = v beta2 + (1 - beta2) g g;
  // p = p + neg_step_size m / (sqrt(v) / bias_correction2_sqrt + eps).
  absl::Status Adam(const AdamUpdate& u, Tensor& param, const Tensor& grad, Tensor& exp_avg,
                    Tensor& exp_avg_sq) const;

 protected:
  // The backend's kernels, one per entry above, called only with arguments the entry has
  // checked (the same INVALID_ARGUMENT messages on every backend).
  virtual absl::Status DoSgd(const SgdUpdate& u, Tensor& param, const Tensor& grad,
                             Tensor& momentum_buffer) const = 0;
  virtual absl::Status DoAdam(const AdamUpdate& u, Tensor& param, const Tensor& grad,
                              Tensor& exp_avg, Tensor& exp_avg_sq) const = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_OPTIMIZER_OPS_H_
