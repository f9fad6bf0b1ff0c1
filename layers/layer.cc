#include "layers/layer.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {

absl::Status DoesNotSplit(const Layer& layer, const char* half) {
  return absl::UnimplementedError(absl::StrCat(
      std::string(layer.type()), " layer '", layer.name(), "' has no ", half,
      " (SplitsBackward() is false): the runtime must call Backward during B instead"));
}

}  // namespace

absl::StatusOr<Tensor> Layer::BackwardInput(const LayerContext& ctx, std::span<const Tensor> params,
                                            const SavedTensors& saved, const Tensor& dy) const {
  return DoesNotSplit(*this, "BackwardInput");
}

absl::Status Layer::BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                                   const SavedTensors& saved, const Tensor& dy) const {
  return DoesNotSplit(*this, "BackwardWeight");
}

}  // namespace gpipe
