// ConvOps: 2-D convolution and pooling over NCHW tensors, forward and backward (oneDNN and
// cuDNN shapes), and global average pooling. See runtime/device/ops.h for the common contract.
// Every tensor is f32 with the exact NCHW shape the geometry implies (INVALID_ARGUMENT naming
// the op and the shapes otherwise, checked once by the public entry before the backend's
// protected Do kernel runs); batch 0 is allowed and does nothing. At
// ProductPrecision::kBF16 a convolution rounds its two operands (x and weight, weight and dy, x
// and dy) to bf16 and accumulates in f32 (product_precision.h); biases, bias gradients and
// outputs stay f32.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_CONV_OPS_H_
#define GPIPE_RUNTIME_DEVICE_OPS_CONV_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/core/tensor.h"
#include "runtime/device/ops/product_precision.h"

namespace gpipe {

// The geometry of a 2-D window over [batch, channels, in_h, in_w] giving [batch, out_channels,
// out_h, out_w], PyTorch's definitions (floor mode).
struct Conv2dGeometry {
  int64_t batch = 0;
  int64_t in_channels = 0;
  int64_t in_h = 0, in_w = 0;
  int64_t out_channels = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t padding_h = 0, padding_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
};

enum class PoolKind {
  kMax,  // ties go to the first maximum in row-major window order; padding never wins; NaN wins
  kAvg,  // count_include_pad = true, as torch.nn.AvgPool2d's default
  kAvgExcludePad,  // divided by the input elements the window covers (count_include_pad = false)
};

class ConvOps {
 public:
  virtual ~ConvOps() = default;

  // y = conv(x, weight [out_c, in_c / groups, kh, kw]) (+ bias [out_c] when defined).
  absl::Status Conv2dForward(const Conv2dGeometry& g, ProductPrecision precision, const Tensor& x,
                             const Tensor& weight, const Tensor& bias, Tensor& y) const;
  // dx = conv's input gradient (overwritten).
  absl::Status Conv2dBackwardInput(const Conv2dGeometry& g, ProductPrecision precision,
                                   const Tensor& weight, const Tensor& dy, Tensor& dx) const;
  // dweight += weight gradient; dbias += bias gradient when dbias is defined (double sums of
  // dy as given, never rounded).
  absl::Status Conv2dBackwardParams(const Conv2dGeometry& g, ProductPrecision precision,
                                    const Tensor& x, const Tensor& dy, Tensor& dweight,
                                    Tensor& dbias) const;

  // Pooling windows (groups and out_channels as in_channels). y: [batch, c, out_h, out_w].
  // Sums are taken in float in row-major window order, then divided by the window's divisor.
  absl::Status Pool2dForward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                             Tensor& y) const;
  // dx (overwritten) from dy. Max pooling reads x and its forward output y to find each
  // window's winner again (no index tensor is kept); average pooling reads neither (they may
  // be undefined).
  absl::Status Pool2dBackward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                              const Tensor& y, const Tensor& dy, Tensor& dx) const;

  // y [batch, c] = mean of each [h, w] plane of x [batch, c, h, w], summed in double.
  absl::Status GlobalAvgPool2dForward(const Tensor& x, Tensor& y) const;
  // dx [batch, c, h, w] (overwritten) = dy [batch, c] / (h * w) (in float) over each plane.
  absl::Status GlobalAvgPool2dBackward(const Tensor& dy, Tensor& dx) const;

 protected:
  // The backend's kernels, one per entry above, called only with arguments the entry has
  // checked (the same INVALID_ARGUMENT messages on every backend).
  virtual absl::Status DoConv2dForward(const Conv2dGeometry& g, ProductPrecision precision,
                                       const Tensor& x, const Tensor& weight, const Tensor& bias,
                                       Tensor& y) const = 0;
  virtual absl::Status DoConv2dBackwardInput(const Conv2dGeometry& g, ProductPrecision precision,
                                             const Tensor& weight, const Tensor& dy,
                                             Tensor& dx) const = 0;
  virtual absl::Status DoConv2dBackwardParams(const Conv2dGeometry& g, ProductPrecision precision,
                                              const Tensor& x, const Tensor& dy, Tensor& dweight,
                                              Tensor& dbias) const = 0;
  virtual absl::Status DoPool2dForward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                                       Tensor& y) const = 0;
  virtual absl::Status DoPool2dBackward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                                        const Tensor& y, const Tensor& dy, Tensor& dx) const = 0;
  virtual absl::Status DoGlobalAvgPool2dForward(const Tensor& x, Tensor& y) const = 0;
  virtual absl::Status DoGlobalAvgPool2dBackward(const Tensor& dy, Tensor& dx) const = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_CONV_OPS_H_
