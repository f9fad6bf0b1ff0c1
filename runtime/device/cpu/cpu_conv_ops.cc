#include "runtime/device/cpu/cpu_conv_ops.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/bf16.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops/conv_shapes.h"

namespace gpipe {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

using Type = memory::data_type;

memory::desc Plain(const memory::dims& dims, Tag tag, Type type = Type::f32) {
  return memory::desc(dims, type, tag);
}

memory::desc SourceDesc(const Conv2dGeometry& g, Type type = Type::f32) {
  return Plain({g.batch, g.in_channels, g.in_h, g.in_w}, Tag::nchw, type);
}
memory::desc DestinationDesc(const Conv2dGeometry& g, Type type = Type::f32) {
  return Plain({g.batch, g.out_channels, g.out_h, g.out_w}, Tag::nchw, type);
}
// [out_c, in_c / groups, kh, kw] is already goihw's memory order when split by group.
memory::desc WeightDesc(const Conv2dGeometry& g, Type type = Type::f32) {
  if (g.groups == 1) {
    return Plain({g.out_channels, g.in_channels, g.kernel_h, g.kernel_w}, Tag::oihw, type);
  }
  return Plain(
      {g.groups, g.out_channels / g.groups, g.in_channels / g.groups, g.kernel_h, g.kernel_w},
      Tag::goihw, type);
}

// The operands' type: at kBF16 the two operands of every product are bf16 (the f32 tensors are
// reordered into bf16 workspace copies, which rounds to nearest even); outputs stay f32.
Type OperandType(ProductPrecision precision) {
  return precision == ProductPrecision::kBF16 ? Type::bf16 : Type::f32;
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

// A spatial kernel over >= 16 channels per group each way: oneDNN's blocked direct kernels beat
// its im2col GEMM on NCHW by far more than the reorders cost (3x3 64->64 on 32x32: 110 vs 66
// GFLOP/s single-threaded); 1x1 kernels and thin inputs lose (1x1 64->64: 42 vs 83).
bool UseBlockedLayouts(const Conv2dGeometry& g) {
  return g.kernel_h * g.kernel_w > 1 && g.in_channels / g.groups >= 16 &&
         g.out_channels / g.groups >= 16;
}

// `desc` for a primitive: as given (NCHW / OIHW) or left to oneDNN.
memory::desc Layout(const memory::desc& desc, bool blocked) {
  return blocked ? memory::desc(desc.dims(), desc.data_type(), Tag::any) : desc;
}

// Whether oneDNN runs `pd` with an optimized kernel ("ref" ones are naive loops).
template <typename PrimitiveDesc>
bool Optimized(const PrimitiveDesc& pd) {
  return !std::string(pd.impl_info_str()).starts_with("ref");
}

// Primitive attributes: the scratchpad is ours to provide (from the device's workspace, so it is
// counted), not oneDNN's own allocation.
dnnl::primitive_attr UserScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

}  // namespace

CpuConvOps::GeometryKey CpuConvOps::KeyOf(const Conv2dGeometry& g, int64_t a, int64_t b) {
  return {g.batch,
          g.in_channels,
          g.in_h,
          g.in_w,
          g.out_channels,
          g.out_h,
          g.out_w,
          g.kernel_h,
          g.kernel_w,
          g.stride_h,
          g.stride_w,
          g.padding_h,
          g.padding_w,
          g.dilation_h,
          g.dilation_w,
          g.groups,
          a,
          b};
}

CpuConvOps::Primitives& CpuConvOps::PrimitivesFor(const Conv2dGeometry& g, bool with_bias,
                                                  ProductPrecision precision) const {
  const GeometryKey key = KeyOf(g, with_bias ? 1 : 0, static_cast<int64_t>(precision));
  auto found = cache_.find(key);
  if (found != cache_.end()) return found->second;
  Primitives p;
  p.blocked = UseBlockedLayouts(g);
  const Type operand = OperandType(precision);
  const Window w = WindowOf(g);
  const memory::desc bias = with_bias ? Plain({g.out_channels}, Tag::x) : memory::desc();
  const dnnl::convolution_forward::desc forward(
      dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
      Layout(SourceDesc(g, operand), p.blocked), Layout(WeightDesc(g, operand), p.blocked), bias,
      Layout(DestinationDesc(g), p.blocked), w.strides, w.dilates, w.padding_l, w.padding_r);
  p.forward_pd =
      dnnl::convolution_forward::primitive_desc(forward, UserScratchpad(), dnnl_.engine());
  p.forward = dnnl::convolution_forward(p.forward_pd);
  return cache_.emplace(key, std::move(p)).first->second;
}

CpuConvOps::Primitives& CpuConvOps::BackwardDataFor(const Conv2dGeometry& g,
                                                    ProductPrecision precision) const {
  Primitives& p = PrimitivesFor(g, /*with_bias=*/false, precision);
  if (p.backward_data) return p;
  const Type operand = OperandType(precision);
  const Window w = WindowOf(g);
  const dnnl::convolution_backward_data::desc desc(
      dnnl::algorithm::convolution_direct, Layout(SourceDesc(g), p.blocked),
      Layout(WeightDesc(g, operand), p.blocked), Layout(DestinationDesc(g, operand), p.blocked),
      w.strides, w.dilates, w.padding_l, w.padding_r);
  p.backward_data_pd = dnnl::convolution_backward_data::primitive_desc(
      desc, UserScratchpad(), dnnl_.engine(), p.forward_pd);
  p.backward_data = dnnl::convolution_backward_data(p.backward_data_pd);
  return p;
}

CpuConvOps::Primitives& CpuConvOps::BackwardWeightsFor(const Conv2dGeometry& g,
                                                       ProductPrecision precision) const {
  Primitives& p = PrimitivesFor(g, /*with_bias=*/false, precision);
  if (p.backward_weights) return p;
  const Type operand = OperandType(precision);
  const Window w = WindowOf(g);
  const dnnl::convolution_backward_weights::desc desc(
      dnnl::algorithm::convolution_direct, Layout(SourceDesc(g, operand), p.blocked),
      Layout(WeightDesc(g), p.blocked), Layout(DestinationDesc(g, operand), p.blocked), w.strides,
      w.dilates, w.padding_l, w.padding_r);
  p.backward_weights_pd = dnnl::convolution_backward_weights::primitive_desc(
      desc, UserScratchpad(), dnnl_.engine(), p.forward_pd);
  p.backward_weights = dnnl::convolution_backward_weights(p.backward_weights_pd);
  return p;
}

bool CpuConvOps::NativeBf16(const Conv2dGeometry& g, Direction direction, bool with_bias) const {
  const GeometryKey key = KeyOf(g, static_cast<int64_t>(direction), with_bias ? 1 : 0);
  if (auto found = native_bf16_.find(key); found != native_bf16_.end()) return found->second;
  bool native = false;
  try {
    switch (direction) {
      case Direction::kForward:
        native = Optimized(PrimitivesFor(g, with_bias, ProductPrecision::kBF16).forward_pd);
        break;
      case Direction::kBackwardData:
        native = Optimized(BackwardDataFor(g, ProductPrecision::kBF16).backward_data_pd);
        break;
      case Direction::kBackwardWeights:
        native = Optimized(BackwardWeightsFor(g, ProductPrecision::kBF16).backward_weights_pd);
        break;
    }
  } catch (const dnnl::error&) {
    native = false;  // no bf16 primitive at all: the rounded f32 path serves
  }
  native_bf16_.emplace(key, native);
  return native;
}

absl::StatusOr<Tensor> CpuConvOps::RoundedCopy(const Tensor& tensor) const {
  ASSIGN_OR_RETURN(Tensor copy,
                   Tensor::Empty(workspace_, tensor.shape(), DType::kF32, MemoryKind::kWorkspace));
  const float* __restrict in = tensor.f32();
  float* __restrict out = copy.f32();
  for (int64_t i = 0; i < tensor.num_elements(); ++i) out[i] = RoundToBf16(in[i]);
  return copy;
}

absl::StatusOr<memory> CpuConvOps::Workspace(const memory::desc& desc,
                                             std::vector<Tensor>& held) const {
  const int64_t bytes = static_cast<int64_t>(desc.get_size());
  absl::StatusOr<Tensor> buffer =
      Tensor::Empty(workspace_, Shape{(bytes + 3) / 4}, DType::kF32, MemoryKind::kWorkspace);
  if (!buffer.ok()) return buffer.status();
  held.push_back(*std::move(buffer));
  return memory(desc, dnnl_.engine(), held.back().raw_data());
}

absl::StatusOr<memory> CpuConvOps::InLayout(const memory::desc& wanted, const memory& user,
                                            bool read, std::vector<Tensor>& held) const {
  if (wanted == user.get_desc()) return user;
  absl::StatusOr<memory> buffer = Workspace(wanted, held);
  if (!buffer.ok() || !read) return buffer;
  memory source = user;
  dnnl::reorder(source, *buffer).execute(dnnl_.stream(), source, *buffer);
  return buffer;
}

absl::Status CpuConvOps::DoConv2dForward(const Conv2dGeometry& g, ProductPrecision precision,
                                         const Tensor& x, const Tensor& weight, const Tensor& bias,
                                         Tensor& y) const {
  constexpr const char* kOp = "Conv2dForward";
  if (g.batch == 0) return absl::OkStatus();
  if (precision == ProductPrecision::kBF16 && !NativeBf16(g, Direction::kForward, bias.defined())) {
    ASSIGN_OR_RETURN(const Tensor rounded_x, RoundedCopy(x));
    ASSIGN_OR_RETURN(const Tensor rounded_weight, RoundedCopy(weight));
    return DoConv2dForward(g, ProductPrecision::kF32, rounded_x, rounded_weight, bias, y);
  }
  std::vector<Tensor> held;  // workspace buffers of this call
  try {
    Primitives& p = PrimitivesFor(g, bias.defined(), precision);
    dnnl::engine& engine = dnnl_.engine();
    dnnl::stream& stream = dnnl_.stream();
    memory user_y = Wrap(DestinationDesc(g), engine, y);
    ASSIGN_OR_RETURN(memory dst, InLayout(p.forward_pd.dst_desc(), user_y, /*read=*/false, held));
    ASSIGN_OR_RETURN(memory src, InLayout(p.forward_pd.src_desc(), Wrap(SourceDesc(g), engine, x),
                                          /*read=*/true, held));
    ASSIGN_OR_RETURN(memory weights,
                     InLayout(p.forward_pd.weights_desc(), Wrap(WeightDesc(g), engine, weight),
                              /*read=*/true, held));
    ASSIGN_OR_RETURN(memory scratchpad, Workspace(p.forward_pd.scratchpad_desc(), held));
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src},
                                            {DNNL_ARG_WEIGHTS, weights},
                                            {DNNL_ARG_DST, dst},
                                            {DNNL_ARG_SCRATCHPAD, scratchpad}};
    if (bias.defined()) args[DNNL_ARG_BIAS] = Wrap(Plain({g.out_channels}, Tag::x), engine, bias);
    p.forward.execute(stream, args);
    if (dst != user_y) dnnl::reorder(dst, user_y).execute(stream, dst, user_y);
    stream.wait();
  } catch (const dnnl::error& error) {
    return DnnlError(error, absl::StrCat(kOp, " (", GeometryString(g), ")").c_str());
  }
  return absl::OkStatus();
}

absl::Status CpuConvOps::DoConv2dBackwardInput(const Conv2dGeometry& g, ProductPrecision precision,
                                               const Tensor& weight, const Tensor& dy,
                                               Tensor& dx) const {
  constexpr const char* kOp = "Conv2dBackwardInput";
  if (g.batch == 0) return absl::OkStatus();
  if (precision == ProductPrecision::kBF16 &&
      !NativeBf16(g, Direction::kBackwardData, /*with_bias=*/false)) {
    ASSIGN_OR_RETURN(const Tensor rounded_weight, RoundedCopy(weight));
    ASSIGN_OR_RETURN(const Tensor rounded_dy, RoundedCopy(dy));
    return DoConv2dBackwardInput(g, ProductPrecision::kF32, rounded_weight, rounded_dy, dx);
  }
  std::vector<Tensor> held;  // workspace buffers of this call
  try {
    Primitives& p = BackwardDataFor(g, precision);
    dnnl::engine& engine = dnnl_.engine();
    dnnl::stream& stream = dnnl_.stream();
    memory user_dx = Wrap(SourceDesc(g), engine, dx);
    ASSIGN_OR_RETURN(memory diff_src, InLayout(p.backward_data_pd.diff_src_desc(), user_dx,
                                               /*read=*/false, held));
    ASSIGN_OR_RETURN(memory diff_dst, InLayout(p.backward_data_pd.diff_dst_desc(),
                                               Wrap(DestinationDesc(g), engine, dy),
                                               /*read=*/true, held));
    ASSIGN_OR_RETURN(memory weights, InLayout(p.backward_data_pd.weights_desc(),
                                              Wrap(WeightDesc(g), engine, weight),
                                              /*read=*/true, held));
    ASSIGN_OR_RETURN(memory scratchpad, Workspace(p.backward_data_pd.scratchpad_desc(), held));
    p.backward_data.execute(stream, {{DNNL_ARG_DIFF_DST, diff_dst},
                                     {DNNL_ARG_WEIGHTS, weights},
                                     {DNNL_ARG_DIFF_SRC, diff_src},
                                     {DNNL_ARG_SCRATCHPAD, scratchpad}});
    if (diff_src != user_dx) dnnl::reorder(diff_src, user_dx).execute(stream, diff_src, user_dx);
    stream.wait();
  } catch (const dnnl::error& error) {
    return DnnlError(error, absl::StrCat(kOp, " (", GeometryString(g), ")").c_str());
  }
  return absl::OkStatus();
}

absl::Status CpuConvOps::DoConv2dBackwardParams(const Conv2dGeometry& g, ProductPrecision precision,
                                                const Tensor& x, const Tensor& dy, Tensor& dweight,
                                                Tensor& dbias) const {
  constexpr const char* kOp = "Conv2dBackwardParams";
  if (g.batch == 0) return absl::OkStatus();
  if (precision == ProductPrecision::kBF16 &&
      !NativeBf16(g, Direction::kBackwardWeights, /*with_bias=*/false)) {
    ASSIGN_OR_RETURN(const Tensor rounded_x, RoundedCopy(x));
    ASSIGN_OR_RETURN(const Tensor rounded_dy, RoundedCopy(dy));
    // The bias gradient sums dy as given (never rounded): it is summed here, after.
    Tensor no_bias;
    RETURN_IF_ERROR(
        DoConv2dBackwardParams(g, ProductPrecision::kF32, rounded_x, rounded_dy, dweight, no_bias));
    return AccumulateBiasGrad(g, dy, dbias);
  }
  const int64_t weights = dweight.num_elements();
  // oneDNN overwrites its output; the contract accumulates: the gradient goes to workspace first.
  ASSIGN_OR_RETURN(Tensor weight_grad,
                   Tensor::Empty(workspace_, dweight.shape(), DType::kF32, MemoryKind::kWorkspace));
  std::vector<Tensor> held;  // workspace buffers of this call
  try {
    Primitives& p = BackwardWeightsFor(g, precision);
    dnnl::engine& engine = dnnl_.engine();
    dnnl::stream& stream = dnnl_.stream();
    memory user_dw = Wrap(WeightDesc(g), engine, weight_grad);
    ASSIGN_OR_RETURN(memory diff_weights, InLayout(p.backward_weights_pd.diff_weights_desc(),
                                                   user_dw, /*read=*/false, held));
    ASSIGN_OR_RETURN(memory src, InLayout(p.backward_weights_pd.src_desc(),
                                          Wrap(SourceDesc(g), engine, x), /*read=*/true, held));
    ASSIGN_OR_RETURN(memory diff_dst, InLayout(p.backward_weights_pd.diff_dst_desc(),
                                               Wrap(DestinationDesc(g), engine, dy),
                                               /*read=*/true, held));
    ASSIGN_OR_RETURN(memory scratchpad, Workspace(p.backward_weights_pd.scratchpad_desc(), held));
    p.backward_weights.execute(stream, {{DNNL_ARG_SRC, src},
                                        {DNNL_ARG_DIFF_DST, diff_dst},
                                        {DNNL_ARG_DIFF_WEIGHTS, diff_weights},
                                        {DNNL_ARG_SCRATCHPAD, scratchpad}});
    if (diff_weights != user_dw) {
      dnnl::reorder(diff_weights, user_dw).execute(stream, diff_weights, user_dw);
    }
    stream.wait();
  } catch (const dnnl::error& error) {
    return DnnlError(error, absl::StrCat(kOp, " (", GeometryString(g), ")").c_str());
  }
  float* __restrict out = dweight.f32();
  const float* __restrict grad = weight_grad.f32();
  for (int64_t i = 0; i < weights; ++i) out[i] += grad[i];
  return AccumulateBiasGrad(g, dy, dbias);
}

absl::Status CpuConvOps::AccumulateBiasGrad(const Conv2dGeometry& g, const Tensor& dy,
                                            Tensor& dbias) const {
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
