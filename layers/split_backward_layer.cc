#include "layers/split_backward_layer.h"

#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<Tensor> SplitBackwardLayer::Backward(const LayerContext& ctx,
                                                    std::span<const Tensor> params,
                                                    std::span<Tensor> grads,
                                                    const SavedTensors& saved,
                                                    const Tensor& dy) const {
  RETURN_IF_ERROR(BackwardWeight(ctx, grads, saved, dy));
  return BackwardInput(ctx, params, saved, dy);
}

}  // namespace gpipe
