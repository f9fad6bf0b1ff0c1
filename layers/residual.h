// Residual: y = x + f(x), f a named sub-sequence of layers (He et al. 2016), run whole on one
// stage. f must give back its input's shape. Parameters and buffers are f's, named
// "<residual>.<layer>.<name>" by the runtime ("block1.conv1.weight"). Forward saves what f's
// layers save (see LayerSequence), f's output counted as new storage since y is a separate sum
// (kept as LayerContext::saved_activation_dtype, like the sequence's inner outputs).
// Backward does not split: a zero-bubble schedule runs it whole in BackwardInput.
#ifndef GPIPE_LAYERS_RESIDUAL_H_
#define GPIPE_LAYERS_RESIDUAL_H_

#include <memory>
#include <string>

#include "layers/layer.h"
#include "layers/layer_builder.h"
#include "layers/layer_sequence.h"
#include "proto/plan.pb.h"

namespace gpipe {

class Residual final : public Layer {
 public:
  // Builds the residual plan entry's layers through `build_inner`. INVALID_ARGUMENT, naming the
  // inner layer, for no layers, an empty or repeated name, a layer the builder rejects, or an
  // output shape that differs from the input's.
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape,
                                                       InnerLayerBuilder build_inner);
  // y = x + body(x) around an already built body (composites such as transformer_block).
  static absl::StatusOr<std::unique_ptr<Layer>> Wrap(std::string name, LayerSequence body);

  std::string_view type() const override { return "residual"; }
  // Its body widens per inner layer what that layer reads in f32 (LayerSequence).
  bool TakesBf16Saved() const override { return true; }
  std::vector<ParamSpec> parameter_specs() const override { return body_.parameter_specs(); }
  std::vector<ParamSpec> buffer_specs() const override { return body_.buffer_specs(); }
  bool DependsOnStep() const override { return body_.DependsOnStep(); }
  double ForwardFlopsPerSample() const override;
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  std::vector<SavedSpec> SavedPerSample() const override;

 private:
  Residual(std::string name, LayerSequence body);

  LayerSequence body_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_RESIDUAL_H_
