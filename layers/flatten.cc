#include "layers/flatten.h"

#include "absl/strings/str_cat.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Layer>> Flatten::Create(const pb::Layer& spec,
                                                       const Shape& input_shape) {
  if (input_shape.rank() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flatten needs a per-sample input of rank >= 1, got ", input_shape.ToString()));
  }
  return std::unique_ptr<Layer>(new Flatten(spec.name(), input_shape));
}

Flatten::Flatten(std::string name, const Shape& input_shape)
    : Layer(std::move(name), input_shape, Shape{input_shape.num_elements()}) {}

absl::StatusOr<Tensor> Flatten::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                        const Tensor& x, SavedTensors& saved) const {
  if (!x.defined() || x.dtype() != DType::kF32 || x.shape().rank() != input_shape().rank() + 1 ||
      x.shape().WithoutBatch() != input_shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("flatten layer '", name(), "' expects f32 input [batch, ",
                     input_shape().ToString().substr(1), ", got ", x.DebugString()));
  }
  return x.Reshaped(output_shape().WithBatch(x.shape().dim(0)));
}

absl::StatusOr<Tensor> Flatten::Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                         std::span<Tensor> grads, const SavedTensors& saved,
                                         const Tensor& dy) const {
  if (!dy.defined() || dy.dtype() != DType::kF32 || dy.shape().rank() != 2 ||
      dy.shape().dim(1) != output_shape().dim(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("flatten layer '", name(), "' expects an f32 output gradient [batch, ",
                     output_shape().dim(0), "], got ", dy.DebugString()));
  }
  if (!ctx.need_input_grad) return Tensor();
  return dy.Reshaped(input_shape().WithBatch(dy.shape().dim(0)));
}

}  // namespace gpipe
