#include "layers/global_avg_pool2d.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "layers/window2d.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Layer>> GlobalAvgPool2d::Create(const pb::Layer& spec,
                                                               const Shape& input_shape) {
  RETURN_IF_ERROR(CheckChannelsHeightWidth("global_avg_pool2d", input_shape));
  return std::unique_ptr<Layer>(new GlobalAvgPool2d(spec.name(), input_shape));
}

GlobalAvgPool2d::GlobalAvgPool2d(std::string name, const Shape& input_shape)
    : Layer(std::move(name), input_shape, Shape{input_shape.dim(0)}),
      channels_(input_shape.dim(0)),
      plane_(input_shape.dim(1) * input_shape.dim(2)) {}

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
  const int64_t planes = x.shape().dim(0) * channels_;
  ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(ctx.device, Shape{x.shape().dim(0), channels_},
                                           DType::kF32, MemoryKind::kActivation));
  const float* in = x.f32();
  float* out = y.f32();
  for (int64_t p = 0; p < planes; ++p, in += plane_) {
    double sum = 0.0;
    for (int64_t i = 0; i < plane_; ++i) sum += in[i];
    out[p] = static_cast<float>(sum / static_cast<double>(plane_));
  }
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
  const int64_t planes = dy.shape().dim(0) * channels_;
  ASSIGN_OR_RETURN(Tensor dx, Tensor::Empty(ctx.device, input_shape().WithBatch(dy.shape().dim(0)),
                                            DType::kF32, MemoryKind::kActivation));
  const float* g = dy.f32();
  float* out = dx.f32();
  const float size = static_cast<float>(plane_);
  for (int64_t p = 0; p < planes; ++p, out += plane_) std::fill(out, out + plane_, g[p] / size);
  return dx;
}

}  // namespace gpipe
