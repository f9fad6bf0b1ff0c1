// SplitBackwardLayer: a layer whose backward is its two halves (SplitBackward), so Backward is
// written once here as BackwardWeight then BackwardInput and cannot drift from them: a subclass
// implements only the halves. It splits by default; a subclass whose weight half has nothing to
// do (a layer norm without affine parameters) returns nullptr from split_backward() and still
// backwards correctly. Thread-compatible, like every Layer.
#ifndef GPIPE_LAYERS_SPLIT_BACKWARD_LAYER_H_
#define GPIPE_LAYERS_SPLIT_BACKWARD_LAYER_H_

#include <span>

#include "absl/status/statusor.h"
#include "layers/layer.h"

namespace gpipe {

class SplitBackwardLayer : public Layer, public SplitBackward {
 public:
  using Layer::Layer;

  const SplitBackward* split_backward() const override { return this; }
  // BackwardWeight(grads), then BackwardInput.
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const final;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_SPLIT_BACKWARD_LAYER_H_
