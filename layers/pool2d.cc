#include "layers/pool2d.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {
namespace {

// Window taps per sample: channels * H_out * W_out * kh * kw.
double TapsPerSample(const Window2d& window) {
  return static_cast<double>(window.channels) * static_cast<double>(window.output_plane()) *
         static_cast<double>(window.kernel.h * window.kernel.w);
}

}  // namespace

Pool2d::Pool2d(std::string name, const Shape& input_shape, const Window2d& window)
    : Layer(std::move(name), input_shape, window.OutputShape(window.channels)), window_(window) {}

absl::Status Pool2d::CheckInput(const Tensor& x) const {
  if (!x.defined() || x.dtype() != DType::kF32 || x.shape().rank() != 4 ||
      x.shape().WithoutBatch() != input_shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(type()), " layer '", name(), "' expects f32 input [batch, ",
                     input_shape().ToString().substr(1), ", got ", x.DebugString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Pool2d::CheckOutputGrad(const Tensor& dy) const {
  if (!dy.defined() || dy.dtype() != DType::kF32 || dy.shape().rank() != 4 ||
      dy.shape().WithoutBatch() != output_shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(type()), " layer '", name(), "' expects an f32 output gradient [batch, ",
        output_shape().ToString().substr(1), ", got ", dy.DebugString()));
  }
  return dy.shape().dim(0);
}

// ---- MaxPool2d

absl::StatusOr<std::unique_ptr<Layer>> MaxPool2d::Create(const pb::Layer& spec,
                                                         const Shape& input_shape) {
  const pb::MaxPool2d& config = spec.max_pool2d();
  Window2d window;
  ASSIGN_OR_RETURN(window.kernel,
                   ParseHw(config.kernel_size(), "max_pool2d.kernel_size", 1, std::nullopt));
  ASSIGN_OR_RETURN(window.stride, ParseHw(config.stride(), "max_pool2d.stride", 1, window.kernel));
  ASSIGN_OR_RETURN(window.padding, ParseHw(config.padding(), "max_pool2d.padding", 0, Hw{0, 0}));
  ASSIGN_OR_RETURN(window.dilation, ParseHw(config.dilation(), "max_pool2d.dilation", 1, Hw{1, 1}));
  RETURN_IF_ERROR(
      CheckPaddingAtMostHalfKernel("max_pool2d.padding", window.padding, window.kernel));
  RETURN_IF_ERROR(window.Resolve("max_pool2d", input_shape));
  return std::unique_ptr<Layer>(new MaxPool2d(spec.name(), input_shape, window));
}

MaxPool2d::MaxPool2d(std::string name, const Shape& input_shape, const Window2d& window)
    : Pool2d(std::move(name), input_shape, window) {}

double MaxPool2d::ForwardFlopsPerSample() const { return TapsPerSample(window_); }

std::vector<SavedSpec> MaxPool2d::SavedPerSample() const {
  return {{SavedRef::kInput}, {SavedRef::kOutput}};
}

absl::StatusOr<Tensor> MaxPool2d::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                          const Tensor& x, SavedTensors& saved) const {
  RETURN_IF_ERROR(CheckInput(x));
  ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(ctx.device, output_shape().WithBatch(x.shape().dim(0)),
                                           DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(
      ctx.device.ops().conv.Pool2dForward(PoolKind::kMax, Geometry(x.shape().dim(0)), x, y));
  saved.tensors.push_back(x);
  saved.tensors.push_back(y);
  return y;
}

absl::StatusOr<Tensor> MaxPool2d::Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                           std::span<Tensor> grads, const SavedTensors& saved,
                                           const Tensor& dy) const {
  GPIPE_CHECK(saved.tensors.size() == 2) << name() << ": Backward without a matching Forward";
  const Tensor& x = saved.tensors[0];
  const Tensor& y = saved.tensors[1];
  ASSIGN_OR_RETURN(const int64_t batch, CheckOutputGrad(dy));
  if (batch != x.shape().dim(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_pool2d layer '", name(), "': output gradient ", dy.DebugString(),
                     " does not match the forward's input ", x.DebugString()));
  }
  if (!ctx.need_input_grad) return Tensor();
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(
      ctx.device.ops().conv.Pool2dBackward(PoolKind::kMax, Geometry(batch), x, y, dy, dx));
  return dx;
}

// ---- AvgPool2d

absl::StatusOr<std::unique_ptr<Layer>> AvgPool2d::Create(const pb::Layer& spec,
                                                         const Shape& input_shape) {
  const pb::AvgPool2d& config = spec.avg_pool2d();
  Window2d window;
  ASSIGN_OR_RETURN(window.kernel,
                   ParseHw(config.kernel_size(), "avg_pool2d.kernel_size", 1, std::nullopt));
  ASSIGN_OR_RETURN(window.stride, ParseHw(config.stride(), "avg_pool2d.stride", 1, window.kernel));
  ASSIGN_OR_RETURN(window.padding, ParseHw(config.padding(), "avg_pool2d.padding", 0, Hw{0, 0}));
  RETURN_IF_ERROR(
      CheckPaddingAtMostHalfKernel("avg_pool2d.padding", window.padding, window.kernel));
  RETURN_IF_ERROR(window.Resolve("avg_pool2d", input_shape));
  return std::unique_ptr<Layer>(
      new AvgPool2d(spec.name(), input_shape, window, config.count_include_pad()));
}

AvgPool2d::AvgPool2d(std::string name, const Shape& input_shape, const Window2d& window,
                     bool count_include_pad)
    : Pool2d(std::move(name), input_shape, window),
      kind_(count_include_pad ? PoolKind::kAvg : PoolKind::kAvgExcludePad) {}

double AvgPool2d::ForwardFlopsPerSample() const { return TapsPerSample(window_); }

absl::StatusOr<Tensor> AvgPool2d::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                          const Tensor& x, SavedTensors& saved) const {
  RETURN_IF_ERROR(CheckInput(x));
  ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(ctx.device, output_shape().WithBatch(x.shape().dim(0)),
                                           DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(ctx.device.ops().conv.Pool2dForward(kind_, Geometry(x.shape().dim(0)), x, y));
  return y;
}

absl::StatusOr<Tensor> AvgPool2d::Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                           std::span<Tensor> grads, const SavedTensors& saved,
                                           const Tensor& dy) const {
  ASSIGN_OR_RETURN(const int64_t batch, CheckOutputGrad(dy));
  if (!ctx.need_input_grad) return Tensor();
  ASSIGN_OR_RETURN(Tensor dx, Tensor::Empty(ctx.device, input_shape().WithBatch(batch), DType::kF32,
                                            MemoryKind::kActivation));
  RETURN_IF_ERROR(
      ctx.device.ops().conv.Pool2dBackward(kind_, Geometry(batch), Tensor(), Tensor(), dy, dx));
  return dx;
}

}  // namespace gpipe
