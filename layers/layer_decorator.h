// LayerDecorator: a layer that stands for another (the inner one) and changes how it computes:
// its name, shapes, parameters, buffers, FLOPs, host input check, saved tensors and backward split
// are the inner layer's; subclasses implement the compute calls (Forward, Backward, the halves
// BackwardInput and BackwardWeight, which the runtime calls only when the inner layer splits, and
// ForwardJoin and BackwardJoin, which it calls only when the inner layer is a skip join).
// The simulated device's stand-ins (SimLayer) and mixed precision (Bf16Layer) are decorators.
#ifndef GPIPE_LAYERS_LAYER_DECORATOR_H_
#define GPIPE_LAYERS_LAYER_DECORATOR_H_

#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "layers/layer.h"
#include "runtime/core/check.h"

namespace gpipe {

class LayerDecorator : public Layer, public SplitBackward, public SkipJoin {
 public:
  explicit LayerDecorator(std::unique_ptr<Layer> inner)
      : Layer(inner->name(), inner->input_shape(), inner->output_shape()),
        inner_(std::move(inner)) {}

  std::string_view type() const override { return inner_->type(); }
  DType input_dtype() const override { return inner_->input_dtype(); }
  DType output_dtype() const override { return inner_->output_dtype(); }
  bool TakesBf16Inputs() const override { return inner_->TakesBf16Inputs(); }
  bool TakesBf16Saved() const override { return inner_->TakesBf16Saved(); }
  bool TakesBf16OutputGrads() const override { return inner_->TakesBf16OutputGrads(); }
  bool KeepsBf16() const override { return inner_->KeepsBf16(); }
  std::vector<ParamSpec> parameter_specs() const override { return inner_->parameter_specs(); }
  std::vector<ParamSpec> buffer_specs() const override { return inner_->buffer_specs(); }
  double ForwardFlopsPerSample() const override { return inner_->ForwardFlopsPerSample(); }
  absl::Status CheckHostInput(const LayerContext& ctx, const Tensor& x) const override {
    return inner_->CheckHostInput(ctx, x);
  }
  bool OutputAliasesInput() const override { return inner_->OutputAliasesInput(); }
  bool DependsOnStep() const override { return inner_->DependsOnStep(); }
  std::vector<SavedSpec> SavedPerSample() const override { return inner_->SavedPerSample(); }
  const SplitBackward* split_backward() const override {
    return inner_->SplitsBackward() ? this : nullptr;
  }

  const SkipJoin* skip_join() const override {
    return inner_->skip_join() != nullptr ? this : nullptr;
  }
  const std::string& skip_from() const override { return inner_join().skip_from(); }
  const Shape& skip_shape() const override { return inner_join().skip_shape(); }

  const Layer& inner() const { return *inner_; }
  // The inner layer's join interface; only when it is a skip join.
  const SkipJoin& inner_join() const {
    GPIPE_CHECK(inner_->skip_join() != nullptr) << "layer '" << name() << "' is not a skip join";
    return *inner_->skip_join();
  }
  // The inner layer's halves; only when it splits.
  const SplitBackward& inner_halves() const {
    GPIPE_CHECK(inner_->SplitsBackward()) << "layer '" << name() << "' does not split its backward";
    return *inner_->split_backward();
  }

 private:
  std::unique_ptr<Layer> inner_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_LAYER_DECORATOR_H_
