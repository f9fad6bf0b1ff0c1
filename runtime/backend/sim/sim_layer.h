// SimLayer: a layer as a simulated device runs it. It wraps the real layer (whose shapes,
// parameters, saved-tensor spec and split-backward choice it reports unchanged) and, instead of
// computing, returns shape-only tensors and occupies the device for the layer's modelled time:
//   Forward         output of the real output shape and dtype (a view of the input when the real
//                   layer's output aliases it); saves, entry by entry, what SavedPerSample declares
//                   (the input, the output, or new storage of the declared size), so activation
//                   memory matches the planner's prediction; occupies forward.
//   Backward        dx of the input's shape, in the output's dtype; occupies backward_input +
//                   backward_weight.
//   BackwardInput   dx; occupies backward_input (only when the real layer splits).
//   BackwardWeight  occupies backward_weight; gradients are shape-only and stay untouched.
// Thread-compatible, like every Layer.
#ifndef GPIPE_RUNTIME_BACKEND_SIM_SIM_LAYER_H_
#define GPIPE_RUNTIME_BACKEND_SIM_SIM_LAYER_H_

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "layers/layer.h"
#include "layers/layer_decorator.h"
#include "runtime/device/sim/sim_device.h"
#include "runtime/estimate/sim_costs.h"

namespace gpipe {

class SimLayer final : public LayerDecorator {
 public:
  // `device` must outlive the layer and be the device every call's context names.
  SimLayer(std::unique_ptr<Layer> real, SimDevice& device, SimOpTimes times);

  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  absl::StatusOr<Tensor> BackwardInput(const LayerContext& ctx, std::span<const Tensor> params,
                                       const SavedTensors& saved, const Tensor& dy) const override;
  absl::StatusOr<Tensor> ForwardJoin(const LayerContext& ctx, const Tensor& x, const Tensor& skip,
                                     SavedTensors& saved) const override;
  absl::StatusOr<Grads> BackwardJoin(const LayerContext& ctx, const SavedTensors& saved,
                                     const Tensor& dy) const override;
  absl::Status BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                              const SavedTensors& saved, const Tensor& dy) const override;

  // A simulated data source writes no values: there is nothing to check.
  absl::Status CheckHostInput(const LayerContext& ctx, const Tensor& x) const override {
    return absl::OkStatus();
  }

  const SimOpTimes& times() const { return times_; }

 private:
  // dx for a backward of `dy` (undefined when the context needs none).
  absl::StatusOr<Tensor> InputGradient(const LayerContext& ctx, const Tensor& dy) const;

  SimDevice& device_;
  SimOpTimes times_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_BACKEND_SIM_SIM_LAYER_H_
