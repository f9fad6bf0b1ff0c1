#include "layers/conv2d.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

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
    : Layer(std::move(name), input_shape, window.OutputShape(out_channels)),
      window_(window),
      out_channels_(out_channels),
      groups_(groups),
      bias_(bias),
      group_in_(window.channels / groups),
      group_out_(out_channels / groups),
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

bool Conv2d::ColumnsAreInput() const {
  return window_.kernel == Hw{1, 1} && window_.stride == Hw{1, 1} && window_.padding == Hw{0, 0};
}

absl::StatusOr<Tensor> Conv2d::ColumnWorkspace(Device& device) const {
  if (ColumnsAreInput()) return Tensor();
  return Tensor::Empty(device, Shape{groups_ * group_rows_, window_.output_plane()}, DType::kF32,
                       MemoryKind::kWorkspace);
}

void Conv2d::Im2Col(const float* x, float* columns) const {
  const Window2d& w = window_;
  const int64_t out_w = w.output.w;
  const int64_t out_plane = w.output_plane();
  for (int64_t c = 0; c < w.channels; ++c) {
    const float* plane = x + c * w.input_plane();
    for (int64_t i = 0; i < w.kernel.h; ++i) {
      const int64_t row_offset = i * w.dilation.h - w.padding.h;
      const IndexRange rows = InBounds(w.output.h, row_offset, w.stride.h, w.input.h);
      for (int64_t j = 0; j < w.kernel.w; ++j) {
        const int64_t col_offset = j * w.dilation.w - w.padding.w;
        const IndexRange cols = InBounds(out_w, col_offset, w.stride.w, w.input.w);
        float* tap = columns + ((c * w.kernel.h + i) * w.kernel.w + j) * out_plane;
        std::fill(tap, tap + rows.begin * out_w, 0.0f);
        for (int64_t oh = rows.begin; oh < rows.end; ++oh) {
          float* out = tap + oh * out_w;
          const float* in = plane + (oh * w.stride.h + row_offset) * w.input.w +
                            cols.begin * w.stride.w + col_offset;
          std::fill(out, out + cols.begin, 0.0f);
          if (w.stride.w == 1) {
            std::copy(in, in + cols.size(), out + cols.begin);
          } else {
            for (int64_t ow = cols.begin; ow < cols.end; ++ow, in += w.stride.w) out[ow] = *in;
          }
          std::fill(out + cols.end, out + out_w, 0.0f);
        }
        std::fill(tap + rows.end * out_w, tap + out_plane, 0.0f);
      }
    }
  }
}

void Conv2d::Col2Im(const float* columns, float* dx) const {
  const Window2d& w = window_;
  const int64_t out_w = w.output.w;
  const int64_t out_plane = w.output_plane();
  std::fill(dx, dx + w.channels * w.input_plane(), 0.0f);
  for (int64_t c = 0; c < w.channels; ++c) {
    float* plane = dx + c * w.input_plane();
    for (int64_t i = 0; i < w.kernel.h; ++i) {
      const int64_t row_offset = i * w.dilation.h - w.padding.h;
      const IndexRange rows = InBounds(w.output.h, row_offset, w.stride.h, w.input.h);
      for (int64_t j = 0; j < w.kernel.w; ++j) {
        const int64_t col_offset = j * w.dilation.w - w.padding.w;
        const IndexRange cols = InBounds(out_w, col_offset, w.stride.w, w.input.w);
        const float* tap = columns + ((c * w.kernel.h + i) * w.kernel.w + j) * out_plane;
        for (int64_t oh = rows.begin; oh < rows.end; ++oh) {
          const float* in = tap + oh * out_w;
          float* out = plane + (oh * w.stride.h + row_offset) * w.input.w +
                       cols.begin * w.stride.w + col_offset;
          if (w.stride.w == 1) {
            for (int64_t ow = cols.begin; ow < cols.end; ++ow, ++out) *out += in[ow];
          } else {
            for (int64_t ow = cols.begin; ow < cols.end; ++ow, out += w.stride.w) *out += in[ow];
          }
        }
      }
    }
  }
}

absl::StatusOr<Tensor> Conv2d::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                       const Tensor& x, SavedTensors& saved) const {
  if (!x.defined() || x.dtype() != DType::kF32 || x.shape().rank() != 4 ||
      x.shape().WithoutBatch() != input_shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv2d layer '", name(), "' expects f32 input [batch, ",
                     input_shape().ToString().substr(1), ", got ", x.DebugString()));
  }
  const int64_t batch = x.shape().dim(0);
  const int64_t positions = window_.output_plane();
  const int64_t in_sample = input_shape().num_elements();
  const int64_t out_sample = output_shape().num_elements();
  ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(ctx.device, output_shape().WithBatch(batch), DType::kF32,
                                           MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor workspace, ColumnWorkspace(ctx.device));
  const float* weight = params[0].f32();
  const float* bias = bias_ ? params[1].f32() : nullptr;
  for (int64_t n = 0; n < batch; ++n) {
    const float* sample = x.f32() + n * in_sample;
    float* out = y.f32() + n * out_sample;
    const float* columns = sample;
    if (!ColumnsAreInput()) {
      Im2Col(sample, workspace.f32());
      columns = workspace.f32();
    }
    if (bias_) {
      for (int64_t o = 0; o < out_channels_; ++o) {
        std::fill(out + o * positions, out + (o + 1) * positions, bias[o]);
      }
    }
    for (int64_t g = 0; g < groups_; ++g) {
      // y_g[group_out, positions] (+)= W_g[group_out, group_rows] * columns_g[group_rows,
      // positions]
      RETURN_IF_ERROR(ctx.device.Gemm({.transpose_a = false,
                                       .transpose_b = false,
                                       .m = group_out_,
                                       .n = positions,
                                       .k = group_rows_,
                                       .alpha = 1.0f,
                                       .a = weight + g * group_out_ * group_rows_,
                                       .lda = group_rows_,
                                       .b = columns + g * group_rows_ * positions,
                                       .ldb = positions,
                                       .beta = bias_ ? 1.0f : 0.0f,
                                       .c = out + g * group_out_ * positions,
                                       .ldc = positions}));
    }
  }
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

absl::StatusOr<Tensor> Conv2d::Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                        std::span<Tensor> grads, const SavedTensors& saved,
                                        const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  const Tensor& x = saved.tensors[0];
  RETURN_IF_ERROR(AccumulateParamGrads(ctx.device, grads, x, dy));
  return InputGrad(ctx, params, x, dy);
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
  return AccumulateParamGrads(ctx.device, grads, saved.tensors[0], dy);
}

absl::Status Conv2d::AccumulateParamGrads(Device& device, std::span<Tensor> grads, const Tensor& x,
                                          const Tensor& dy) const {
  const int64_t batch = x.shape().dim(0);
  const int64_t positions = window_.output_plane();
  const int64_t in_sample = input_shape().num_elements();
  const int64_t out_sample = output_shape().num_elements();
  ASSIGN_OR_RETURN(Tensor workspace, ColumnWorkspace(device));
  float* dweight = grads[0].f32();
  for (int64_t n = 0; n < batch; ++n) {
    const float* sample = x.f32() + n * in_sample;
    const float* columns = sample;
    if (!ColumnsAreInput()) {
      Im2Col(sample, workspace.f32());
      columns = workspace.f32();
    }
    const float* dout = dy.f32() + n * out_sample;
    for (int64_t g = 0; g < groups_; ++g) {
      // dW_g[group_out, group_rows] += dy_g[group_out, positions] * columns_g[group_rows,
      // positions]^T
      RETURN_IF_ERROR(device.Gemm({.transpose_a = false,
                                   .transpose_b = true,
                                   .m = group_out_,
                                   .n = group_rows_,
                                   .k = positions,
                                   .alpha = 1.0f,
                                   .a = dout + g * group_out_ * positions,
                                   .lda = positions,
                                   .b = columns + g * group_rows_ * positions,
                                   .ldb = positions,
                                   .beta = 1.0f,
                                   .c = dweight + g * group_out_ * group_rows_,
                                   .ldc = group_rows_}));
    }
  }
  if (bias_) {
    // Summed over samples and positions in double, then added once: the error does not grow
    // with the batch.
    std::vector<double> sum(out_channels_, 0.0);
    for (int64_t n = 0; n < batch; ++n) {
      const float* dout = dy.f32() + n * out_sample;
      for (int64_t o = 0; o < out_channels_; ++o) {
        const float* channel = dout + o * positions;
        double channel_sum = 0.0;
        for (int64_t p = 0; p < positions; ++p) channel_sum += channel[p];
        sum[o] += channel_sum;
      }
    }
    float* dbias = grads[1].f32();
    for (int64_t o = 0; o < out_channels_; ++o) dbias[o] += static_cast<float>(sum[o]);
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Conv2d::InputGrad(const LayerContext& ctx, std::span<const Tensor> params,
                                         const Tensor& x, const Tensor& dy) const {
  if (!ctx.need_input_grad) return Tensor();
  const int64_t batch = x.shape().dim(0);
  const int64_t positions = window_.output_plane();
  const int64_t in_sample = input_shape().num_elements();
  const int64_t out_sample = output_shape().num_elements();
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor workspace, ColumnWorkspace(ctx.device));
  const float* weight = params[0].f32();
  for (int64_t n = 0; n < batch; ++n) {
    float* dsample = dx.f32() + n * in_sample;
    float* dcolumns = ColumnsAreInput() ? dsample : workspace.f32();
    const float* dout = dy.f32() + n * out_sample;
    for (int64_t g = 0; g < groups_; ++g) {
      // dcolumns_g[group_rows, positions] = W_g[group_out, group_rows]^T * dy_g[group_out,
      // positions]
      RETURN_IF_ERROR(ctx.device.Gemm({.transpose_a = true,
                                       .transpose_b = false,
                                       .m = group_rows_,
                                       .n = positions,
                                       .k = group_out_,
                                       .alpha = 1.0f,
                                       .a = weight + g * group_out_ * group_rows_,
                                       .lda = group_rows_,
                                       .b = dout + g * group_out_ * positions,
                                       .ldb = positions,
                                       .beta = 0.0f,
                                       .c = dcolumns + g * group_rows_ * positions,
                                       .ldc = positions}));
    }
    if (!ColumnsAreInput()) Col2Im(dcolumns, dsample);
  }
  return dx;
}

}  // namespace gpipe
