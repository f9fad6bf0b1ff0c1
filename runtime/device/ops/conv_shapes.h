// Shape checks shared by every backend's convolution and pooling ops: every message names the op,
// the geometry and the offending tensor, as the ConvOps contract asks.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_CONV_SHAPES_H_
#define GPIPE_RUNTIME_DEVICE_OPS_CONV_SHAPES_H_

#include <string>

#include "absl/status/status.h"
#include "runtime/core/shape.h"
#include "runtime/core/tensor.h"
#include "runtime/device/ops/conv_ops.h"

namespace gpipe {

// "batch 2, 3x8x8 -> 4x4x4, kernel 3x3, stride 2x2, padding 1x1, dilation 1x1, groups 1".
std::string GeometryString(const Conv2dGeometry& g);

// Fails unless every size is >= 1 (batch >= 0), the output sizes follow PyTorch's floor rule
// and, for a convolution, groups divides both channel counts; for a pool, padding is at most
// half the kernel (so every window covers an input element).
absl::Status CheckGeometry(const char* op, const Conv2dGeometry& g, bool pooling);

// The NCHW shapes a geometry implies: input [batch, in_c, in_h, in_w], output [batch, out_c,
// out_h, out_w], weight [out_c, in_c / groups, kernel_h, kernel_w].
Shape InputShape(const Conv2dGeometry& g);
Shape OutputShape(const Conv2dGeometry& g);
Shape WeightShape(const Conv2dGeometry& g);
// A pool's input [batch, c, in_h, in_w] and output [batch, c, out_h, out_w] (c = in_channels).
Shape PoolInputShape(const Conv2dGeometry& g);
Shape PoolOutputShape(const Conv2dGeometry& g);

// Global average pooling operands: x [batch, c, h, w] (each >= 1 but the batch) and y [batch, c],
// both f32 (forward); dy and dx likewise (backward).
absl::Status CheckGlobalAvgPoolForward(const Tensor& x, const Tensor& y);
absl::Status CheckGlobalAvgPoolBackward(const Tensor& dy, const Tensor& dx);

// Fails unless `tensor` is a defined f32 tensor of exactly `expected`.
absl::Status CheckTensor(const char* op, const char* name, const Conv2dGeometry& g,
                         const Tensor& tensor, const Shape& expected);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_CONV_SHAPES_H_
