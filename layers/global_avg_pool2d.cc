#include "layers/global_avg_pool2d.h"

#include "absl/strings/str_cat.h"
#include "layers/window2d.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Layer>> GlobalAvgPool2d::Create(const pb::Layer& spec,
                                                               const Shape& input_shape) {
  RETURN_IF_ERROR(CheckChannelsHeightWidth("global_avg_pool2d", input_shape));
  return std::unique_ptr<Layer>(new GlobalAvgPool2d(spec.name(), input_shape));
}

GlobalAvgPool2d::GlobalAvgPool2d(std::string name, const Shape& input_shape)
    : Layer(std::move(name), input_shape, Shape{input_shape.dim(0)}),
      channels_(input_shape.dim(0)) {}

double GlobalAvgPool2d::ForwardFlopsPerSample() const {
  return static_cast<double>(input_shape().num_elements());
}

absl::StatusOr<Tensor> GlobalAvgPool2d::Forward(const LayerContext& ctx,
                                                std::span<const Tensor> params, const Tensor& x,
                                                SavedTensors& saved) const {
  if (!x.defined() || x.dtype() != DType::kF32 || x.shape().rank() != 4 ||
      x.shape().WithoutBatch() != input_shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("global_avg_pool2d layer '", name(), "' expects f32 input [batch, ",
                     input_shape().ToString().substr(1), ", got ", x.DebugString()));
  }
  ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(ctx.device, Shape{x.shape().dim(0), channels_},
                                           DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(ctx.device.ops().conv.GlobalAvgPool2dForward(x, y));
  return y;
}

absl::StatusOr<Tensor> GlobalAvgPool2d::Backward(const LayerContext& ctx,
                                                 std::span<const Tensor> params,
                                                 std::span<Tensor> grads, const SavedTensors& saved,
                                                 const Tensor& dy) const {
  if (!dy.defined() || dy.dtype() != DType::kF32 || dy.shape().rank() != 2 ||
      dy.shape().dim(1) != channels_) {
    return absl::InvalidArgumentError(absl::StrCat("global_avg_pool2d layer '", name(),
                                                   "' expects an f32 output gradient [batch, ",
                                                   channels_, "], got ", dy.DebugString()));
  }
  if (!ctx.need_input_grad) return Tensor();
  ASSIGN_OR_RETURN(Tensor dx, Tensor::Empty(ctx.device, input_shape().WithBatch(dy.shape().dim(0)),
                                            DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(ctx.device.ops().conv.GlobalAvgPool2dBackward(dy, dx));
  return dx;
}

}  // namespace gpipe
