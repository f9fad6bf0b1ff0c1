// ActivationOps: parameter-free element-wise activations and their gradients, and the gated
// SwiGLU product of Llama's MLP. See
// runtime/device/ops.h for the common contract.
// Each public entry checks its arguments (the same INVALID_ARGUMENT on every backend) and then
// runs the backend's protected Do kernel.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_ACTIVATION_OPS_H_
#define GPIPE_RUNTIME_DEVICE_OPS_ACTIVATION_OPS_H_

#include "absl/status/status.h"
#include "runtime/core/tensor.h"

namespace gpipe {

enum class Activation {
  kRelu,  // max(x, 0), NaN passes through; backward reads the output y
  kTanh,  // backward reads the output y: dx = dy (1 - y^2)
  kGelu,  // exact (erf) GELU, as torch.nn.GELU(); backward reads the input x
};

// Which tensor the backward of `activation` reads: true for the input x, false for the output.
constexpr bool ActivationBackwardReadsInput(Activation activation) {
  return activation == Activation::kGelu;
}

class ActivationOps {
 public:
  virtual ~ActivationOps() = default;
  // y = f(x), same element count. Each operand is f32 or bf16 (mixed precision's storage,
  // training.precision BF16): f is computed in f32 on a bf16 input's exact widening, and a bf16
  // output is that f32 result rounded to nearest even, so a bf16 operand gives the bits of an
  // f32 call on the widened input followed by a Cast.
  absl::Status Forward(Activation activation, const Tensor& x, Tensor& y) const;
  // dx = dy * f'(.), where `saved` is x or y as ActivationBackwardReadsInput says; f32 or bf16
  // operands as in Forward.
  absl::Status Backward(Activation activation, const Tensor& saved, const Tensor& dy,
                        Tensor& dx) const;

  // y = silu(gate) * up with silu(g) = g / (1 + exp(-g)), element-wise in f32 (gate, up and y
  // the same element count; y may not be gate or up). Operands f32 or bf16 as in Forward.
  absl::Status SwiGluForward(const Tensor& gate, const Tensor& up, Tensor& y) const;
  // dgate = dy * up * silu'(gate), dup = dy * silu(gate), silu'(g) = s (1 + g (1 - s)) with
  // s = sigmoid(g); both overwritten (neither may share storage with an input). Operands f32 or
  // bf16 as in Forward.
  absl::Status SwiGluBackward(const Tensor& gate, const Tensor& up, const Tensor& dy, Tensor& dgate,
                              Tensor& dup) const;

 protected:
  // The backend's kernels, one per entry above, called only with arguments the entry has
  // checked (the same INVALID_ARGUMENT messages on every backend).
  virtual absl::Status DoForward(Activation activation, const Tensor& x, Tensor& y) const = 0;
  virtual absl::Status DoBackward(Activation activation, const Tensor& saved, const Tensor& dy,
                                  Tensor& dx) const = 0;
  virtual absl::Status DoSwiGluForward(const Tensor& gate, const Tensor& up, Tensor& y) const = 0;
  virtual absl::Status DoSwiGluBackward(const Tensor& gate, const Tensor& up, const Tensor& dy,
                                        Tensor& dgate, Tensor& dup) const = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_ACTIVATION_OPS_H_
