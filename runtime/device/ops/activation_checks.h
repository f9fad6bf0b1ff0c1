// Argument checks of ActivationOps, shared by every backend so each says the same thing.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_ACTIVATION_CHECKS_H_
#define GPIPE_RUNTIME_DEVICE_OPS_ACTIVATION_CHECKS_H_

#include "absl/status/status.h"
#include "runtime/core/tensor.h"
#include "runtime/device/ops/activation_ops.h"

namespace gpipe::op_checks {

// "relu", "tanh", "gelu".
const char* ActivationName(Activation activation);

// INVALID_ARGUMENT naming the op unless `activation` is one of the enum's values.
absl::Status KnownActivation(const char* op, Activation activation);

// INVALID_ARGUMENT naming the op, the activation and both tensors unless `a` and `b` are defined
// f32 or bf16 tensors (each its own) with the same element count.
absl::Status ActivationPair(const char* op, Activation activation, const char* a_name,
                            const Tensor& a, const char* b_name, const Tensor& b);

}  // namespace gpipe::op_checks

#endif  // GPIPE_RUNTIME_DEVICE_OPS_ACTIVATION_CHECKS_H_
