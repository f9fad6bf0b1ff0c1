// ElementwiseActivation: shared plumbing of the parameter-free elementwise activations (relu,
// tanh, gelu). Output shape = input shape. Forward saves one tensor for Backward, either its
// input or its output (whichever the derivative needs; both share storage with a tensor that
// exists anyway), so an activation costs no memory beyond its output. Subclasses supply the
// math as whole-array kernels (one virtual call per tensor, none per element).
#ifndef GPIPE_LAYERS_ELEMENTWISE_ACTIVATION_H_
#define GPIPE_LAYERS_ELEMENTWISE_ACTIVATION_H_

#include <cstdint>

#include "layers/layer.h"

namespace gpipe {

class ElementwiseActivation : public Layer {
 public:
  // Which tensor Forward keeps for Backward.
  enum class Saves { kInput, kOutput };

  double ForwardFlopsPerSample() const final;
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const final;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const final;
  // {kInput} or {kOutput}, according to `Saves`.
  std::vector<SavedSpec> SavedPerSample() const final;

 protected:
  ElementwiseActivation(std::string name, const Shape& input_shape, Saves saves,
                        double flops_per_element);

  // y[i] = f(x[i]) for i in [0, n).
  virtual void ApplyForward(const float* x, float* y, int64_t n) const = 0;
  // dx[i] = dy[i] * f'(.) where saved[i] is x[i] or y[i] according to `Saves`.
  virtual void ApplyBackward(const float* saved, const float* dy, float* dx, int64_t n) const = 0;

 private:
  Saves saves_;
  double flops_per_element_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_ELEMENTWISE_ACTIVATION_H_
