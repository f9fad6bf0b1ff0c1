// ElementwiseActivation: shared plumbing of the parameter-free elementwise activations (relu,
// tanh, gelu). Output shape = input shape. Forward saves one tensor for Backward, either its
// input or its output (whichever the derivative needs; both share storage with a tensor that
// exists anyway), so an activation costs no memory beyond its output. Subclasses only name
// their Activation; the math runs on the device through ActivationOps. Under bf16 products
// (mixed precision) bf16 passes through (Layer::KeepsBf16): a bf16 input gives a bf16 output and
// a bf16 output gradient a bf16 input gradient, computed in f32 and rounded once.
#ifndef GPIPE_LAYERS_ELEMENTWISE_ACTIVATION_H_
#define GPIPE_LAYERS_ELEMENTWISE_ACTIVATION_H_

#include <cstdint>

#include "layers/layer.h"
#include "runtime/device/ops/activation_ops.h"

namespace gpipe {

class ElementwiseActivation : public Layer {
 public:
  bool TakesBf16Inputs() const final { return true; }
  bool TakesBf16OutputGrads() const final { return true; }
  bool KeepsBf16() const final { return true; }
  double ForwardFlopsPerSample() const final;
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const final;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const final;
  // {kInput} or {kOutput}: what ActivationBackwardReadsInput says the backward reads.
  std::vector<SavedSpec> SavedPerSample() const final;

 protected:
  ElementwiseActivation(std::string name, const Shape& input_shape, Activation activation,
                        double flops_per_element);

 private:
  Activation activation_;
  double flops_per_element_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_ELEMENTWISE_ACTIVATION_H_
