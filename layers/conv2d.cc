#include "layers/conv2d.h"

#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Layer>> Conv2d::Create(const pb::Layer& spec,
                                                      const Shape& input_shape) {
  const pb::Conv2d& config = spec.conv2d();
  if (!config.has_out_channels() || config.out_channels() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv2d.out_channels must be set and >= 1, got ", config.out_channels()));
  }
  Window2d window;
  ASSIGN_OR_RETURN(window.kernel,
                   ParseHw(config.kernel_size(), "conv2d.kernel_size", 1, std::nullopt));
  ASSIGN_OR_RETURN(window.stride, ParseHw(config.stride(), "conv2d.stride", 1, Hw{1, 1}));
  ASSIGN_OR_RETURN(window.padding, ParseHw(config.padding(), "conv2d.padding", 0, Hw{0, 0}));
  ASSIGN_OR_RETURN(window.dilation, ParseHw(config.dilation(), "conv2d.dilation", 1, Hw{1, 1}));
  if (config.groups() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv2d.groups must be >= 1, got ", config.groups()));
  }
  RETURN_IF_ERROR(window.Resolve("conv2d", input_shape));
  if (window.channels % config.groups() != 0 || config.out_channels() % config.groups() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "conv2d.groups (", config.groups(), ") must divide both the input's channels (",
        window.channels, ", of input ", input_shape.ToString(), ") and conv2d.out_channels (",
        config.out_channels(), "); choose a common divisor"));
  }
  return std::unique_ptr<Layer>(new Conv2d(spec.name(), input_shape, window, config.out_channels(),
                                           config.groups(), config.bias()));
}

Conv2d::Conv2d(std::string name, const Shape& input_shape, const Window2d& window,
               int64_t out_channels, int64_t groups, bool bias)
    : SplitBackwardLayer(std::move(name), input_shape, window.OutputShape(out_channels)),
      window_(window),
      out_channels_(out_channels),
      groups_(groups),
      bias_(bias),
      group_in_(window.channels / groups),
      group_rows_(window.channels / groups * window.kernel.h * window.kernel.w) {}

std::vector<ParamSpec> Conv2d::parameter_specs() const {
  const double bound = 1.0 / std::sqrt(static_cast<double>(group_rows_));
  std::vector<ParamSpec> specs;
  specs.push_back({"weight", Shape{out_channels_, group_in_, window_.kernel.h, window_.kernel.w},
                   ParamInit::kUniform, bound});
  if (bias_) specs.push_back({"bias", Shape{out_channels_}, ParamInit::kUniform, bound});
  return specs;
}

double Conv2d::ForwardFlopsPerSample() const {
  return 2.0 * static_cast<double>(out_channels_) * static_cast<double>(window_.output_plane()) *
         static_cast<double>(group_rows_);
}

std::vector<SavedSpec> Conv2d::SavedPerSample() const { return {{SavedRef::kInput}}; }

absl::StatusOr<Tensor> Conv2d::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                       const Tensor& x, SavedTensors& saved) const {
  if (!x.defined() || x.dtype() != DType::kF32 || x.shape().rank() != 4 ||
      x.shape().WithoutBatch() != input_shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv2d layer '", name(), "' expects f32 input [batch, ",
                     input_shape().ToString().substr(1), ", got ", x.DebugString()));
  }
  const int64_t batch = x.shape().dim(0);
  ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(ctx.device, output_shape().WithBatch(batch), DType::kF32,
                                           MemoryKind::kActivation));
  RETURN_IF_ERROR(ctx.device.ops().conv.Conv2dForward(
      window_.Geometry(batch, out_channels_, groups_), ctx.product_precision, x, params[0],
      bias_ ? params[1] : Tensor(), y));
  saved.tensors.push_back(x);
  return y;
}

absl::Status Conv2d::CheckOutputGrad(const SavedTensors& saved, const Tensor& dy) const {
  GPIPE_CHECK(saved.tensors.size() == 1) << name() << ": Backward without a matching Forward";
  const Shape expected = output_shape().WithBatch(saved.tensors[0].shape().dim(0));
  if (!dy.defined() || dy.dtype() != DType::kF32 || dy.shape() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv2d layer '", name(), "': output gradient ", dy.DebugString(),
                     " does not match the forward's output f32", expected.ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Conv2d::BackwardInput(const LayerContext& ctx,
                                             std::span<const Tensor> params,
                                             const SavedTensors& saved, const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  return InputGrad(ctx, params, saved.tensors[0], dy);
}

absl::Status Conv2d::BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                                    const SavedTensors& saved, const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  return AccumulateParamGrads(ctx, grads, saved.tensors[0], dy);
}

absl::Status Conv2d::AccumulateParamGrads(const LayerContext& ctx, std::span<Tensor> grads,
                                          const Tensor& x, const Tensor& dy) const {
  Tensor no_bias;
  return ctx.device.ops().conv.Conv2dBackwardParams(
      window_.Geometry(x.shape().dim(0), out_channels_, groups_), ctx.product_precision, x, dy,
      grads[0], bias_ ? grads[1] : no_bias);
}

absl::StatusOr<Tensor> Conv2d::InputGrad(const LayerContext& ctx, std::span<const Tensor> params,
                                         const Tensor& x, const Tensor& dy) const {
  if (!ctx.need_input_grad) return Tensor();
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(ctx.device.ops().conv.Conv2dBackwardInput(
      window_.Geometry(x.shape().dim(0), out_channels_, groups_), ctx.product_precision, params[0],
      dy, dx));
  return dx;
}

}  // namespace gpipe
