// PassThroughLayer: a LayerDecorator whose compute calls are the inner layer's, for tests that
// change one thing about a layer (what it declares, what it records) and nothing of how it
// computes: they derive from it and override only that.
#ifndef GPIPE_TESTS_LAYERS_PASS_THROUGH_LAYER_H_
#define GPIPE_TESTS_LAYERS_PASS_THROUGH_LAYER_H_

#include <memory>
#include <span>
#include <utility>

#include "layers/layer_decorator.h"

namespace gpipe::testing {

class PassThroughLayer : public LayerDecorator {
 public:
  explicit PassThroughLayer(std::unique_ptr<Layer> inner) : LayerDecorator(std::move(inner)) {}

  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override {
    return inner().Forward(ctx, params, x, saved);
  }
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override {
    return inner().Backward(ctx, params, grads, saved, dy);
  }
  absl::StatusOr<Tensor> BackwardInput(const LayerContext& ctx, std::span<const Tensor> params,
                                       const SavedTensors& saved, const Tensor& dy) const override {
    return inner_halves().BackwardInput(ctx, params, saved, dy);
  }
  absl::Status BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                              const SavedTensors& saved, const Tensor& dy) const override {
    return inner_halves().BackwardWeight(ctx, grads, saved, dy);
  }
  absl::StatusOr<Tensor> ForwardJoin(const LayerContext& ctx, const Tensor& x, const Tensor& skip,
                                     SavedTensors& saved) const override {
    return inner_join().ForwardJoin(ctx, x, skip, saved);
  }
  absl::StatusOr<Grads> BackwardJoin(const LayerContext& ctx, const SavedTensors& saved,
                                     const Tensor& dy) const override {
    return inner_join().BackwardJoin(ctx, saved, dy);
  }
};

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_LAYERS_PASS_THROUGH_LAYER_H_
