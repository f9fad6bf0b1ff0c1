#include "runtime/exec/stage_model.h"

#include "absl/strings/str_cat.h"
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
  StageModel stage;
  stage.first_layer_ = first_layer;
  Shape shape = input_shape;
  for (int i = first_layer; i < end_layer; ++i) {
    auto layer = registry.Create(model.layers(i), shape);
    if (!layer.ok()) {
      return WithContext(layer.status(), absl::StrCat("layer '", model.layers(i).name(), "'"));
    }
    shape = (*layer)->output_shape();
    stage.layers_.push_back(*std::move(layer));
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
