#include "runtime/device/cpu/cpu_conv_ops.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cpu/cpu_conv_shapes.h"

namespace gpipe {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

memory::desc Plain(const memory::dims& dims, Tag tag) {
  return memory::desc(dims, memory::data_type::f32, tag);
}

memory::desc SourceDesc(const Conv2dGeometry& g) {
  return Plain({g.batch, g.in_channels, g.in_h, g.in_w}, Tag::nchw);
}
memory::desc DestinationDesc(const Conv2dGeometry& g) {
  return Plain({g.batch, g.out_channels, g.out_h, g.out_w}, Tag::nchw);
}
// [out_c, in_c / groups, kh, kw] is already goihw's memory order when split by group.
memory::desc WeightDesc(const Conv2dGeometry& g) {
  if (g.groups == 1) {
    return Plain({g.out_channels, g.in_channels, g.kernel_h, g.kernel_w}, Tag::oihw);
  }
  return Plain({g.groups, g.out_channels / g.groups, g.in_channels / g.groups, g.kernel_h,
                g.kernel_w},
               Tag::goihw);
}

Shape InputShape(const Conv2dGeometry& g) { return {g.batch, g.in_channels, g.in_h, g.in_w}; }
Shape OutputShape(const Conv2dGeometry& g) { return {g.batch, g.out_channels, g.out_h, g.out_w}; }
Shape WeightShape(const Conv2dGeometry& g) {
  return {g.out_channels, g.in_channels / g.groups, g.kernel_h, g.kernel_w};
}

// Windows: oneDNN counts dilation from 0 (PyTorch's minus 1). Right padding equal to the left
// one reproduces PyTorch's floor-mode output size (oneDNN divides the same way).
struct Window {
  memory::dims strides, dilates, padding_l, padding_r;
};
Window WindowOf(const Conv2dGeometry& g) {
  return {{g.stride_h, g.stride_w},
          {g.dilation_h - 1, g.dilation_w - 1},
          {g.padding_h, g.padding_w},
          {g.padding_h, g.padding_w}};
}

memory Wrap(const memory::desc& desc, dnnl::engine& engine, const Tensor& tensor) {
  // oneDNN takes non-const handles; inputs are only read.
  return memory(desc, engine, const_cast<void*>(tensor.raw_data()));
}

absl::Status CheckConv(const char* op, const Conv2dGeometry& g) {
  return CheckGeometry(op, g, /*pooling=*/false);
}

}  // namespace

CpuConvOps::Primitives& CpuConvOps::PrimitivesFor(const Conv2dGeometry& g,
                                                   bool with_bias) const {
  const GeometryKey key = {g.batch,     g.in_channels, g.in_h,      g.in_w,      g.out_channels,
                           g.out_h,     g.out_w,       g.kernel_h,  g.kernel_w,  g.stride_h,
                           g.stride_w,  g.padding_h,   g.padding_w, g.dilation_h, g.dilation_w,
                           g.groups,    with_bias ? 1 : 0};
  auto found = cache_.find(key);
  if (found != cache_.end()) return found->second;
  const Window w = WindowOf(g);
  const memory::desc bias =
      with_bias ? Plain({g.out_channels}, Tag::x) : memory::desc();
  const dnnl::convolution_forward::desc forward(
      dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, SourceDesc(g),
      WeightDesc(g), bias, DestinationDesc(g), w.strides, w.dilates, w.padding_l, w.padding_r);
  Primitives primitives;
  primitives.forward_pd = dnnl::convolution_forward::primitive_desc(forward, dnnl_.engine());
  primitives.forward = dnnl::convolution_forward(primitives.forward_pd);
  return cache_.emplace(key, std::move(primitives)).first->second;
}

absl::Status CpuConvOps::Conv2dForward(const Conv2dGeometry& g, const Tensor& x,
                                       const Tensor& weight, const Tensor& bias,
                                       Tensor& y) const {
  constexpr const char* kOp = "Conv2dForward";
  RETURN_IF_ERROR(CheckConv(kOp, g));
  RETURN_IF_ERROR(CheckTensor(kOp, "x", g, x, InputShape(g)));
  RETURN_IF_ERROR(CheckTensor(kOp, "weight", g, weight, WeightShape(g)));
  if (bias.defined()) RETURN_IF_ERROR(CheckTensor(kOp, "bias", g, bias, Shape{g.out_channels}));
  RETURN_IF_ERROR(CheckTensor(kOp, "y", g, y, OutputShape(g)));
  if (g.batch == 0) return absl::OkStatus();
  try {
    Primitives& p = PrimitivesFor(g, bias.defined());
    dnnl::engine& engine = dnnl_.engine();
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, Wrap(SourceDesc(g), engine, x)},
        {DNNL_ARG_WEIGHTS, Wrap(WeightDesc(g), engine, weight)},
        {DNNL_ARG_DST, Wrap(DestinationDesc(g), engine, y)}};
    if (bias.defined()) args[DNNL_ARG_BIAS] = Wrap(Plain({g.out_channels}, Tag::x), engine, bias);
    p.forward.execute(dnnl_.stream(), args);
    dnnl_.stream().wait();
  } catch (const dnnl::error& error) {
    return DnnlError(error, absl::StrCat(kOp, " (", GeometryString(g), ")").c_str());
  }
  return absl::OkStatus();
}

absl::Status CpuConvOps::Conv2dBackwardInput(const Conv2dGeometry& g, const Tensor& weight,
                                             const Tensor& dy, Tensor& dx) const {
  constexpr const char* kOp = "Conv2dBackwardInput";
  RETURN_IF_ERROR(CheckConv(kOp, g));
  RETURN_IF_ERROR(CheckTensor(kOp, "weight", g, weight, WeightShape(g)));
  RETURN_IF_ERROR(CheckTensor(kOp, "dy", g, dy, OutputShape(g)));
  RETURN_IF_ERROR(CheckTensor(kOp, "dx", g, dx, InputShape(g)));
  if (g.batch == 0) return absl::OkStatus();
  try {
    Primitives& p = PrimitivesFor(g, /*with_bias=*/false);
    if (!p.has_backward_data) {
      const Window w = WindowOf(g);
      const dnnl::convolution_backward_data::desc desc(
          dnnl::algorithm::convolution_direct, SourceDesc(g), WeightDesc(g), DestinationDesc(g),
          w.strides, w.dilates, w.padding_l, w.padding_r);
      p.backward_data = dnnl::convolution_backward_data(
          dnnl::convolution_backward_data::primitive_desc(desc, dnnl_.engine(), p.forward_pd));
      p.has_backward_data = true;
    }
    dnnl::engine& engine = dnnl_.engine();
    p.backward_data.execute(dnnl_.stream(),
                            {{DNNL_ARG_DIFF_DST, Wrap(DestinationDesc(g), engine, dy)},
                             {DNNL_ARG_WEIGHTS, Wrap(WeightDesc(g), engine, weight)},
                             {DNNL_ARG_DIFF_SRC, Wrap(SourceDesc(g), engine, dx)}});
    dnnl_.stream().wait();
  } catch (const dnnl::error& error) {
    return DnnlError(error, absl::StrCat(kOp, " (", GeometryString(g), ")").c_str());
  }
  return absl::OkStatus();
}

absl::Status CpuConvOps::Conv2dBackwardParams(const Conv2dGeometry& g, const Tensor& x,
                                              const Tensor& dy, Tensor& dweight,
                                              Tensor& dbias) const {
  constexpr const char* kOp = "Conv2dBackwardParams";
  RETURN_IF_ERROR(CheckConv(kOp, g));
  RETURN_IF_ERROR(CheckTensor(kOp, "x", g, x, InputShape(g)));
  RETURN_IF_ERROR(CheckTensor(kOp, "dy", g, dy, OutputShape(g)));
  RETURN_IF_ERROR(CheckTensor(kOp, "dweight", g, dweight, WeightShape(g)));
  if (dbias.defined()) {
    RETURN_IF_ERROR(CheckTensor(kOp, "dbias", g, dbias, Shape{g.out_channels}));
  }
  if (g.batch == 0) return absl::OkStatus();
  const int64_t weights = dweight.num_elements();
  weight_grad_scratch_.resize(weights);
  try {
    Primitives& p = PrimitivesFor(g, /*with_bias=*/false);
    if (!p.has_backward_weights) {
      const Window w = WindowOf(g);
      const dnnl::convolution_backward_weights::desc desc(
          dnnl::algorithm::convolution_direct, SourceDesc(g), WeightDesc(g), DestinationDesc(g),
          w.strides, w.dilates, w.padding_l, w.padding_r);
      p.backward_weights = dnnl::convolution_backward_weights(
          dnnl::convolution_backward_weights::primitive_desc(desc, dnnl_.engine(),
                                                             p.forward_pd));
      p.has_backward_weights = true;
    }
    dnnl::engine& engine = dnnl_.engine();
    p.backward_weights.execute(
        dnnl_.stream(),
        {{DNNL_ARG_SRC, Wrap(SourceDesc(g), engine, x)},
         {DNNL_ARG_DIFF_DST, Wrap(DestinationDesc(g), engine, dy)},
         {DNNL_ARG_DIFF_WEIGHTS, memory(WeightDesc(g), engine, weight_grad_scratch_.data())}});
    dnnl_.stream().wait();
  } catch (const dnnl::error& error) {
    return DnnlError(error, absl::StrCat(kOp, " (", GeometryString(g), ")").c_str());
  }
  // oneDNN overwrites its output; the contract accumulates.
  float* __restrict out = dweight.f32();
  const float* __restrict grad = weight_grad_scratch_.data();
  for (int64_t i = 0; i < weights; ++i) out[i] += grad[i];
  if (!dbias.defined()) return absl::OkStatus();
  // Per sample and channel a double sum over positions, summed over samples in double and
  // added once: the error does not grow with the batch (the rule of every bias gradient).
  const int64_t positions = g.out_h * g.out_w;
  std::vector<double> sums(g.out_channels, 0.0);
  const float* dout = dy.f32();
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t o = 0; o < g.out_channels; ++o) {
      const float* channel = dout + (n * g.out_channels + o) * positions;
      double channel_sum = 0.0;
      for (int64_t i = 0; i < positions; ++i) channel_sum += channel[i];
      sums[o] += channel_sum;
    }
  }
  float* bias_out = dbias.f32();
  for (int64_t o = 0; o < g.out_channels; ++o) bias_out[o] += static_cast<float>(sums[o]);
  return absl::OkStatus();
}

}  // namespace gpipe
