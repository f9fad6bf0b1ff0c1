#include "layers/pool2d.h"

#include <limits>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// Window taps per sample: channels * H_out * W_out * kh * kw.
double TapsPerSample(const Window2d& window) {
  return static_cast<double>(window.channels) * static_cast<double>(window.output_plane()) *
         static_cast<double>(window.kernel.h * window.kernel.w);
}

// The maximum of a window's taps: NaN if any tap is NaN (PyTorch propagates it), -infinity when
// there are none. Branch-free (a maxss per tap): which tap wins is data-dependent and would
// mispredict.
inline float WindowMax(const float* plane, int64_t first, int64_t rows, int64_t cols,
                       int64_t row_step, int64_t col_step) {
  float best = -std::numeric_limits<float>::infinity();
  bool any_nan = false;
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = plane + first + i * row_step;
    for (int64_t j = 0; j < cols; ++j) {
      const float v = row[j * col_step];
      best = v > best ? v : best;
      any_nan |= v != v;
    }
  }
  return any_nan ? std::numeric_limits<float>::quiet_NaN() : best;
}

// The flat plane index of the first tap (row-major) equal to `max`, or of the first NaN tap
// when `max` is NaN; -1 when there is none. Scans backwards so that the last match kept is the
// first, without a data-dependent branch.
inline int64_t FirstIndexOf(float max, const float* plane, int64_t first, int64_t rows,
                            int64_t cols, int64_t row_step, int64_t col_step) {
  const bool nan = max != max;
  int64_t found = -1;
  for (int64_t i = rows - 1; i >= 0; --i) {
    for (int64_t j = cols - 1; j >= 0; --j) {
      const int64_t index = first + i * row_step + j * col_step;
      const float v = plane[index];
      // found = match ? index : found, as a mask: compilers turn the ternary into a branch.
      const int64_t match = static_cast<int64_t>(v == max) | static_cast<int64_t>(nan & (v != v));
      found += (index - found) & -match;
    }
  }
  return found;
}

}  // namespace

Pool2d::Pool2d(std::string name, const Shape& input_shape, const Window2d& window)
    : Layer(std::move(name), input_shape, window.OutputShape(window.channels)),
      window_(window),
      row_taps_(window.RowTaps()),
      col_taps_(window.ColTaps()),
      row_step_(window.dilation.h * window.input.w),
      col_step_(window.dilation.w) {}

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
  const int64_t planes = x.shape().dim(0) * window_.channels;
  ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(ctx.device, output_shape().WithBatch(x.shape().dim(0)),
                                           DType::kF32, MemoryKind::kActivation));
  for (int64_t p = 0; p < planes; ++p) {
    const float* in = x.f32() + p * window_.input_plane();
    float* out = y.f32() + p * window_.output_plane();
    for (int64_t oh = 0; oh < window_.output.h; ++oh) {
      for (int64_t ow = 0; ow < window_.output.w; ++ow) {
        const Taps taps = TapsOf(oh, ow);
        *out++ = WindowMax(in, taps.first, taps.rows, taps.cols, row_step_, col_step_);
      }
    }
  }
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
                   Tensor::Zeros(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  const int64_t planes = batch * window_.channels;
  for (int64_t p = 0; p < planes; ++p) {
    const float* in = x.f32() + p * window_.input_plane();
    const float* max = y.f32() + p * window_.output_plane();
    const float* g = dy.f32() + p * window_.output_plane();
    float* d = dx.f32() + p * window_.input_plane();
    for (int64_t oh = 0; oh < window_.output.h; ++oh) {
      for (int64_t ow = 0; ow < window_.output.w; ++ow, ++max, ++g) {
        const Taps taps = TapsOf(oh, ow);
        const int64_t index =
            FirstIndexOf(*max, in, taps.first, taps.rows, taps.cols, row_step_, col_step_);
        if (index >= 0) d[index] += *g;
      }
    }
  }
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
    : Pool2d(std::move(name), input_shape, window), count_include_pad_(count_include_pad) {}

double AvgPool2d::ForwardFlopsPerSample() const { return TapsPerSample(window_); }

float AvgPool2d::Divisor(const Taps& taps) const {
  // In floor mode no window reaches past the padding, so the padded window is the whole kernel;
  // padding <= kernel / 2 leaves every window at least one input element.
  if (count_include_pad_) return static_cast<float>(window_.kernel.h * window_.kernel.w);
  return static_cast<float>(taps.rows * taps.cols);
}

absl::StatusOr<Tensor> AvgPool2d::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                          const Tensor& x, SavedTensors& saved) const {
  RETURN_IF_ERROR(CheckInput(x));
  const int64_t planes = x.shape().dim(0) * window_.channels;
  ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(ctx.device, output_shape().WithBatch(x.shape().dim(0)),
                                           DType::kF32, MemoryKind::kActivation));
  for (int64_t p = 0; p < planes; ++p) {
    const float* in = x.f32() + p * window_.input_plane();
    float* out = y.f32() + p * window_.output_plane();
    for (int64_t oh = 0; oh < window_.output.h; ++oh) {
      for (int64_t ow = 0; ow < window_.output.w; ++ow) {
        const Taps taps = TapsOf(oh, ow);
        float sum = 0.0f;
        for (int64_t i = 0; i < taps.rows; ++i) {
          const float* row = in + taps.first + i * row_step_;
          for (int64_t j = 0; j < taps.cols; ++j) sum += row[j];
        }
        *out++ = sum / Divisor(taps);
      }
    }
  }
  return y;
}

absl::StatusOr<Tensor> AvgPool2d::Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                           std::span<Tensor> grads, const SavedTensors& saved,
                                           const Tensor& dy) const {
  ASSIGN_OR_RETURN(const int64_t batch, CheckOutputGrad(dy));
  if (!ctx.need_input_grad) return Tensor();
  const int64_t planes = batch * window_.channels;
  ASSIGN_OR_RETURN(Tensor dx, Tensor::Zeros(ctx.device, input_shape().WithBatch(batch), DType::kF32,
                                            MemoryKind::kActivation));
  for (int64_t p = 0; p < planes; ++p) {
    const float* g = dy.f32() + p * window_.output_plane();
    float* d = dx.f32() + p * window_.input_plane();
    for (int64_t oh = 0; oh < window_.output.h; ++oh) {
      for (int64_t ow = 0; ow < window_.output.w; ++ow) {
        const Taps taps = TapsOf(oh, ow);
        const float share = *g++ / Divisor(taps);
        for (int64_t i = 0; i < taps.rows; ++i) {
          float* row = d + taps.first + i * row_step_;
          for (int64_t j = 0; j < taps.cols; ++j) row[j] += share;
        }
      }
    }
  }
  return dx;
}

}  // namespace gpipe
