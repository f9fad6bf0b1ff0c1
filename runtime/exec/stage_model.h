// StageModel: the layers one stage owns (a contiguous slice of model.layers) and, on the last
// stage, the loss. Built from the resolved plan; holds no tensors (see ParameterStore).
#ifndef GPIPE_RUNTIME_EXEC_STAGE_MODEL_H_
#define GPIPE_RUNTIME_EXEC_STAGE_MODEL_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/layer.h"
#include "layers/loss.h"
#include "layers/registry.h"
#include "proto/plan.pb.h"

namespace gpipe {

class StageModel {
 public:
  // Layers [first_layer, end_layer) of `model`, whose first layer takes per-sample inputs of
  // `input_shape`. The loss is built when `end_layer` is the model's last layer.
  static absl::StatusOr<StageModel> Create(const pb::Model& model, int first_layer, int end_layer,
                                           const Shape& input_shape, const LayerRegistry& registry);

  int num_layers() const { return static_cast<int>(layers_.size()); }
  const Layer& layer(int local_index) const { return *layers_[local_index]; }
  // Index of local layer `local_index` in model.layers.
  int global_index(int local_index) const { return first_layer_ + local_index; }
  const Shape& input_shape() const { return layers_.front()->input_shape(); }
  const Shape& output_shape() const { return layers_.back()->output_shape(); }
  // Null unless this stage ends the model.
  const Loss* loss() const { return loss_.get(); }
  // Whether local layer 0 is the model's first layer (its input gradient is never needed).
  bool holds_model_input() const { return first_layer_ == 0; }

  // Replaces every layer (with its global index) and the loss, if any, by what the functions make
  // of them: decorators that keep the layer's interface (a simulated device's stand-ins).
  using LayerDecorator =
      std::function<std::unique_ptr<Layer>(std::unique_ptr<Layer> layer, int global_index)>;
  using LossDecorator = std::function<std::unique_ptr<Loss>(std::unique_ptr<Loss> loss)>;
  void Decorate(const LayerDecorator& layer, const LossDecorator& loss);

 private:
  StageModel() = default;
  int first_layer_ = 0;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::unique_ptr<Loss> loss_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_STAGE_MODEL_H_
