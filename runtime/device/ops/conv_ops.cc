#include "runtime/device/ops/conv_ops.h"

#include "runtime/core/status_macros.h"
#include "runtime/device/ops/conv_shapes.h"

namespace gpipe {

absl::Status ConvOps::Conv2dForward(const Conv2dGeometry& g, ProductPrecision precision,
                                    const Tensor& x, const Tensor& weight, const Tensor& bias,
                                    Tensor& y) const {
  constexpr const char* kOp = "Conv2dForward";
  RETURN_IF_ERROR(CheckGeometry(kOp, g, /*pooling=*/false));
  RETURN_IF_ERROR(CheckTensor(kOp, "x", g, x, InputShape(g)));
  RETURN_IF_ERROR(CheckTensor(kOp, "weight", g, weight, WeightShape(g)));
  if (bias.defined()) RETURN_IF_ERROR(CheckTensor(kOp, "bias", g, bias, Shape{g.out_channels}));
  RETURN_IF_ERROR(CheckTensor(kOp, "y", g, y, OutputShape(g)));
  return DoConv2dForward(g, precision, x, weight, bias, y);
}

absl::Status ConvOps::Conv2dBackwardInput(const Conv2dGeometry& g, ProductPrecision precision,
                                          const Tensor& weight, const Tensor& dy,
                                          Tensor& dx) const {
  constexpr const char* kOp = "Conv2dBackwardInput";
  RETURN_IF_ERROR(CheckGeometry(kOp, g, /*pooling=*/false));
  RETURN_IF_ERROR(CheckTensor(kOp, "weight", g, weight, WeightShape(g)));
  RETURN_IF_ERROR(CheckTensor(kOp, "dy", g, dy, OutputShape(g)));
  RETURN_IF_ERROR(CheckTensor(kOp, "dx", g, dx, InputShape(g)));
  return DoConv2dBackwardInput(g, precision, weight, dy, dx);
}

absl::Status ConvOps::Conv2dBackwardParams(const Conv2dGeometry& g, ProductPrecision precision,
                                           const Tensor& x, const Tensor& dy, Tensor& dweight,
                                           Tensor& dbias) const {
  constexpr const char* kOp = "Conv2dBackwardParams";
  RETURN_IF_ERROR(CheckGeometry(kOp, g, /*pooling=*/false));
  RETURN_IF_ERROR(CheckTensor(kOp, "x", g, x, InputShape(g)));
  RETURN_IF_ERROR(CheckTensor(kOp, "dy", g, dy, OutputShape(g)));
  RETURN_IF_ERROR(CheckTensor(kOp, "dweight", g, dweight, WeightShape(g)));
  if (dbias.defined()) {
    RETURN_IF_ERROR(CheckTensor(kOp, "dbias", g, dbias, Shape{g.out_channels}));
  }
  return DoConv2dBackwardParams(g, precision, x, dy, dweight, dbias);
}

absl::Status ConvOps::Pool2dForward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                                    Tensor& y) const {
  constexpr const char* kOp = "Pool2dForward";
  RETURN_IF_ERROR(CheckGeometry(kOp, g, /*pooling=*/true));
  RETURN_IF_ERROR(CheckTensor(kOp, "x", g, x, PoolInputShape(g)));
  RETURN_IF_ERROR(CheckTensor(kOp, "y", g, y, PoolOutputShape(g)));
  return DoPool2dForward(kind, g, x, y);
}

absl::Status ConvOps::Pool2dBackward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                                     const Tensor& y, const Tensor& dy, Tensor& dx) const {
  constexpr const char* kOp = "Pool2dBackward";
  RETURN_IF_ERROR(CheckGeometry(kOp, g, /*pooling=*/true));
  if (kind == PoolKind::kMax) {
    RETURN_IF_ERROR(CheckTensor(kOp, "x", g, x, PoolInputShape(g)));
    RETURN_IF_ERROR(CheckTensor(kOp, "y", g, y, PoolOutputShape(g)));
  }
  RETURN_IF_ERROR(CheckTensor(kOp, "dy", g, dy, PoolOutputShape(g)));
  RETURN_IF_ERROR(CheckTensor(kOp, "dx", g, dx, PoolInputShape(g)));
  return DoPool2dBackward(kind, g, x, y, dy, dx);
}

absl::Status ConvOps::GlobalAvgPool2dForward(const Tensor& x, Tensor& y) const {
  RETURN_IF_ERROR(CheckGlobalAvgPoolForward(x, y));
  return DoGlobalAvgPool2dForward(x, y);
}

absl::Status ConvOps::GlobalAvgPool2dBackward(const Tensor& dy, Tensor& dx) const {
  RETURN_IF_ERROR(CheckGlobalAvgPoolBackward(dy, dx));
  return DoGlobalAvgPool2dBackward(dy, dx);
}

}  // namespace gpipe
