#include "runtime/device/ops/conv_shapes.h"

#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {

// floor((input + 2 padding - dilation (kernel - 1) - 1) / stride) + 1 (PyTorch).
int64_t OutputSize(int64_t input, int64_t kernel, int64_t stride, int64_t padding,
                   int64_t dilation) {
  const int64_t span = input + 2 * padding - dilation * (kernel - 1) - 1;
  const int64_t floor = span >= 0 ? span / stride : -((-span + stride - 1) / stride);
  return floor + 1;
}

}  // namespace

std::string GeometryString(const Conv2dGeometry& g) {
  return absl::StrCat("batch ", g.batch, ", ", g.in_channels, "x", g.in_h, "x", g.in_w, " -> ",
                      g.out_channels, "x", g.out_h, "x", g.out_w, ", kernel ", g.kernel_h, "x",
                      g.kernel_w, ", stride ", g.stride_h, "x", g.stride_w, ", padding ",
                      g.padding_h, "x", g.padding_w, ", dilation ", g.dilation_h, "x", g.dilation_w,
                      ", groups ", g.groups);
}

absl::Status CheckGeometry(const char* op, const Conv2dGeometry& g, bool pooling) {
  const bool positive = g.batch >= 0 && g.in_channels >= 1 && g.in_h >= 1 && g.in_w >= 1 &&
                        g.out_h >= 1 && g.out_w >= 1 && g.kernel_h >= 1 && g.kernel_w >= 1 &&
                        g.stride_h >= 1 && g.stride_w >= 1 && g.padding_h >= 0 &&
                        g.padding_w >= 0 && g.dilation_h >= 1 && g.dilation_w >= 1 &&
                        (pooling || (g.out_channels >= 1 && g.groups >= 1));
  const bool sizes =
      positive &&
      g.out_h == OutputSize(g.in_h, g.kernel_h, g.stride_h, g.padding_h, g.dilation_h) &&
      g.out_w == OutputSize(g.in_w, g.kernel_w, g.stride_w, g.padding_w, g.dilation_w);
  const bool groups =
      pooling || (positive && g.in_channels % g.groups == 0 && g.out_channels % g.groups == 0);
  const bool padding = !pooling || (2 * g.padding_h <= g.kernel_h && 2 * g.padding_w <= g.kernel_w);
  if (sizes && groups && padding) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": inconsistent geometry (", GeometryString(g),
      "): sizes must be >= 1, outputs follow floor((in + 2 padding - dilation (kernel - 1) - 1) "
      "/ stride) + 1",
      pooling ? ", padding at most half the kernel" : ", groups divide both channel counts"));
}

absl::Status CheckTensor(const char* op, const char* name, const Conv2dGeometry& g,
                         const Tensor& tensor, const Shape& expected) {
  if (tensor.defined() && tensor.dtype() == DType::kF32 && tensor.shape() == expected) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", name, " must be f32",
                                                 expected.ToString(), " for ", GeometryString(g),
                                                 ", got ", tensor.DebugString()));
}

Shape InputShape(const Conv2dGeometry& g) { return {g.batch, g.in_channels, g.in_h, g.in_w}; }
Shape OutputShape(const Conv2dGeometry& g) { return {g.batch, g.out_channels, g.out_h, g.out_w}; }
Shape WeightShape(const Conv2dGeometry& g) {
  return {g.out_channels, g.in_channels / g.groups, g.kernel_h, g.kernel_w};
}

Shape PoolInputShape(const Conv2dGeometry& g) { return {g.batch, g.in_channels, g.in_h, g.in_w}; }
Shape PoolOutputShape(const Conv2dGeometry& g) {
  return {g.batch, g.in_channels, g.out_h, g.out_w};
}

absl::Status CheckGlobalAvgPoolForward(const Tensor& x, const Tensor& y) {
  const Shape& s = x.shape();
  if (!x.defined() || x.dtype() != DType::kF32 || s.rank() != 4 || s.dim(1) < 1 || s.dim(2) < 1 ||
      s.dim(3) < 1 || !y.defined() || y.dtype() != DType::kF32 ||
      y.shape() != Shape{s.dim(0), s.dim(1)}) {
    return absl::InvalidArgumentError(
        absl::StrCat("GlobalAvgPool2dForward: needs f32 x [batch, c, h, w] (each >= 1 but the "
                     "batch) and y [batch, c], got x ",
                     x.DebugString(), " and y ", y.DebugString()));
  }
  return absl::OkStatus();
}

absl::Status CheckGlobalAvgPoolBackward(const Tensor& dy, const Tensor& dx) {
  const Shape& s = dx.shape();
  if (!dx.defined() || dx.dtype() != DType::kF32 || s.rank() != 4 || s.dim(1) < 1 || s.dim(2) < 1 ||
      s.dim(3) < 1 || !dy.defined() || dy.dtype() != DType::kF32 ||
      dy.shape() != Shape{s.dim(0), s.dim(1)}) {
    return absl::InvalidArgumentError(
        absl::StrCat("GlobalAvgPool2dBackward: needs f32 dy [batch, c] and dx [batch, c, h, w] "
                     "(each >= 1 but the batch), got dy ",
                     dy.DebugString(), " and dx ", dx.DebugString()));
  }
  return absl::OkStatus();
}

}  // namespace gpipe
