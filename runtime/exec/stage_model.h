// StageModel: the layers one stage owns (a contiguous slice of model.layers) and, on the last
// stage, the loss. Built from the resolved plan; holds no tensors (see ParameterStore). It also
// knows the chunk's skip connections (plan: skip_add, skip_concat): which of its join layers read
// an output kept on the chunk and which one received from another chunk, and which of its layers'
// outputs other layers read, here or elsewhere.
#ifndef GPIPE_RUNTIME_EXEC_STAGE_MODEL_H_
#define GPIPE_RUNTIME_EXEC_STAGE_MODEL_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/layer.h"
#include "layers/loss.h"
#include "layers/registry.h"
#include "layers/skip_edges.h"
#include "proto/plan.pb.h"

namespace gpipe {

class StageModel {
 public:
  // Layers [first_layer, end_layer) of `model`, whose first layer takes per-sample inputs of
  // `input_shape`. The loss is built when `end_layer` is the model's last layer. A join reading an
  // earlier chunk's layer learns that output's shape by building the layers before it (from
  // model.input), which hold no tensors.
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
  // Whether model layer `global` is one of this chunk's.
  bool Holds(int global) const {
    return global >= first_layer_ && global < first_layer_ + num_layers();
  }

  // Skip connections. The model layer whose output local layer `local_index` joins (a skip_add or
  // skip_concat), or -1 when it is no join.
  int join_producer(int local_index) const { return join_producer_[local_index]; }
  // The join layers (model indices, descending: the order their gradients are summed in) that read
  // local layer `local_index`'s output, on this chunk or another.
  const std::vector<int>& skip_readers(int local_index) const { return readers_[local_index]; }
  // Join layers of this chunk whose skip input comes from another chunk (model indices,
  // ascending).
  const std::vector<int>& received_skips() const { return received_skips_; }
  // The skip connections from this chunk's layers into other chunks (by join, ascending).
  const std::vector<SkipEdge>& sent_skips() const { return sent_skips_; }

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
  std::vector<int> join_producer_;         // per local layer
  std::vector<std::vector<int>> readers_;  // per local layer
  std::vector<int> received_skips_;
  std::vector<SkipEdge> sent_skips_;
  std::unique_ptr<Loss> loss_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_STAGE_MODEL_H_
