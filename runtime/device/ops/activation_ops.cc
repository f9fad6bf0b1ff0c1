#include "runtime/device/ops/activation_ops.h"

#include "runtime/core/status_macros.h"
#include "runtime/device/ops/activation_checks.h"

namespace gpipe {

using op_checks::ActivationPair;
using op_checks::KnownActivation;

absl::Status ActivationOps::Forward(Activation activation, const Tensor& x, Tensor& y) const {
  RETURN_IF_ERROR(KnownActivation("Forward", activation));
  RETURN_IF_ERROR(ActivationPair("Forward", activation, "x", x, "y", y));
  return DoForward(activation, x, y);
}

absl::Status ActivationOps::Backward(Activation activation, const Tensor& saved, const Tensor& dy,
                                     Tensor& dx) const {
  RETURN_IF_ERROR(KnownActivation("Backward", activation));
  RETURN_IF_ERROR(ActivationPair("Backward", activation, "saved", saved, "dy", dy));
  RETURN_IF_ERROR(ActivationPair("Backward", activation, "dy", dy, "dx", dx));
  return DoBackward(activation, saved, dy, dx);
}

}  // namespace gpipe
