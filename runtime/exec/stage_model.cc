#include "runtime/exec/stage_model.h"

#include "absl/strings/str_cat.h"
#include "layers/skip_edges.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<StageModel> StageModel::Create(const pb::Model& model, int first_layer,
                                              int end_layer, const Shape& input_shape,
                                              const LayerRegistry& registry) {
  if (first_layer < 0 || end_layer > model.layers_size() || first_layer >= end_layer) {
    return absl::InvalidArgumentError(absl::StrCat("stage layer range [", first_layer, ", ",
                                                   end_layer, ") is invalid for a model of ",
                                                   model.layers_size(), " layers"));
  }
  ASSIGN_OR_RETURN(const std::vector<SkipEdge> edges, FindSkipEdges(model));
  // Outputs of earlier chunks that this one joins: their shapes come from building the layers
  // from the model's input on.
  int start = first_layer;
  for (const SkipEdge& edge : edges) {
    if (edge.join >= first_layer && edge.join < end_layer && edge.producer < first_layer) start = 0;
  }
  StageModel stage;
  stage.first_layer_ = first_layer;
  std::vector<Shape> outputs(end_layer);
  Shape shape =
      start == first_layer
          ? input_shape
          : Shape(std::vector<int64_t>(model.input().shape().begin(), model.input().shape().end()));
  for (int i = start; i < end_layer; ++i) {
    int producer = -1;
    for (const SkipEdge& edge : edges) {
      if (edge.join == i) producer = edge.producer;
    }
    auto layer =
        registry.Create(model.layers(i), shape, producer >= 0 ? &outputs[producer] : nullptr);
    if (!layer.ok()) {
      return WithContext(layer.status(), absl::StrCat("layer '", model.layers(i).name(), "'"));
    }
    shape = (*layer)->output_shape();
    outputs[i] = shape;
    if (i < first_layer) continue;
    stage.layers_.push_back(*std::move(layer));
    stage.join_producer_.push_back(producer);
    if (producer >= 0 && producer < first_layer) stage.received_skips_.push_back(i);
  }
  stage.readers_.resize(stage.layers_.size());
  for (auto it = edges.rbegin(); it != edges.rend(); ++it) {  // descending join index
    if (!stage.Holds(it->producer)) continue;
    stage.readers_[it->producer - first_layer].push_back(it->join);
  }
  for (const SkipEdge& edge : edges) {
    if (stage.Holds(edge.producer) && !stage.Holds(edge.join)) stage.sent_skips_.push_back(edge);
  }
  if (end_layer == model.layers_size()) {
    ASSIGN_OR_RETURN(stage.loss_, CreateLoss(model.loss()));
    RETURN_IF_ERROR(stage.loss_->ValidateOutputShape(shape));
  }
  return stage;
}

void StageModel::Decorate(const LayerDecorator& layer, const LossDecorator& loss) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i] = layer(std::move(layers_[i]), first_layer_ + static_cast<int>(i));
  }
  if (loss_ != nullptr) loss_ = loss(std::move(loss_));
}

}  // namespace gpipe
