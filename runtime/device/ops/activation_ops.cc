#include "runtime/device/ops/activation_ops.h"

#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops/activation_checks.h"

namespace gpipe {

using op_checks::ActivationPair;
using op_checks::KnownActivation;

namespace {

// `tensor` (`name`) is a defined f32 or bf16 tensor with `elements` elements that shares no
// storage with any of `inputs` (when `output`).
absl::Status SwiGluOperand(const char* op, const char* name, const Tensor& tensor, int64_t elements,
                           std::initializer_list<const Tensor*> inputs = {}) {
  if (!tensor.defined() || !(tensor.dtype() == DType::kF32 || tensor.dtype() == DType::kBF16) ||
      tensor.num_elements() != elements) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", name, " must be f32 or bf16 with ",
                                                   elements, " elements, got ",
                                                   tensor.DebugString()));
  }
  for (const Tensor* input : inputs) {
    if (elements > 0 && tensor.SharesStorageWith(*input)) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", name, " ", tensor.DebugString(), " shares storage with an input"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

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

absl::Status ActivationOps::SwiGluForward(const Tensor& gate, const Tensor& up, Tensor& y) const {
  constexpr char kOp[] = "ActivationOps::SwiGluForward";
  if (!gate.defined()) return SwiGluOperand(kOp, "gate", gate, 0);
  const int64_t n = gate.num_elements();
  RETURN_IF_ERROR(SwiGluOperand(kOp, "gate", gate, n));
  RETURN_IF_ERROR(SwiGluOperand(kOp, "up", up, n));
  RETURN_IF_ERROR(SwiGluOperand(kOp, "y", y, n, {&gate, &up}));
  return DoSwiGluForward(gate, up, y);
}

absl::Status ActivationOps::SwiGluBackward(const Tensor& gate, const Tensor& up, const Tensor& dy,
                                           Tensor& dgate, Tensor& dup) const {
  constexpr char kOp[] = "ActivationOps::SwiGluBackward";
  if (!gate.defined()) return SwiGluOperand(kOp, "gate", gate, 0);
  const int64_t n = gate.num_elements();
  RETURN_IF_ERROR(SwiGluOperand(kOp, "gate", gate, n));
  RETURN_IF_ERROR(SwiGluOperand(kOp, "up", up, n));
  RETURN_IF_ERROR(SwiGluOperand(kOp, "dy", dy, n));
  RETURN_IF_ERROR(SwiGluOperand(kOp, "dgate", dgate, n, {&gate, &up, &dy}));
  RETURN_IF_ERROR(SwiGluOperand(kOp, "dup", dup, n, {&gate, &up, &dy, &dgate}));
  return DoSwiGluBackward(gate, up, dy, dgate, dup);
}

}  // namespace gpipe
