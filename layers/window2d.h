// Window2d: the geometry of a 2-D sliding window (convolution, pooling) over a per-sample
// [channels, height, width] input, as PyTorch defines it (floor mode):
//   out = (in + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1.
// Also parses the plan's "1 or 2 values" fields (kernel_size, stride, padding, dilation). Every
// error is INVALID_ARGUMENT naming the field or the input shape and saying what to do.
#ifndef GPIPE_LAYERS_WINDOW2D_H_
#define GPIPE_LAYERS_WINDOW2D_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/repeated_field.h"
#include "runtime/core/shape.h"
#include "runtime/device/ops/conv_ops.h"

namespace gpipe {

// One window property along height and width.
struct Hw {
  int64_t h = 0;
  int64_t w = 0;
  friend bool operator==(const Hw& a, const Hw& b) = default;
};

// Reads a field of one value (both dimensions) or two (height, width), each >= min_value.
// An empty field gives `fallback`, or fails when there is none (the field is required).
// `field` names it in messages: "conv2d.kernel_size".
absl::StatusOr<Hw> ParseHw(const google::protobuf::RepeatedField<int64_t>& values,
                           absl::string_view field, int64_t min_value, std::optional<Hw> fallback);

// Fails unless padding <= kernel / 2 in both dimensions (PyTorch's rule for pooling).
absl::Status CheckPaddingAtMostHalfKernel(absl::string_view field, Hw padding, Hw kernel);

// Fails unless `input_shape` is [channels, height, width] with every dimension >= 1. `kind`
// ("conv2d") starts the message.
absl::Status CheckChannelsHeightWidth(absl::string_view kind, const Shape& input_shape);

struct Window2d {
  Hw kernel;
  Hw stride{1, 1};
  Hw padding;
  Hw dilation{1, 1};
  int64_t channels = 0;
  Hw input;
  Hw output;

  // Fills channels, input and output from `input_shape`; fails (message starting with `kind`)
  // when it is not [C, H, W] or the window leaves an output dimension < 1.
  absl::Status Resolve(absl::string_view kind, const Shape& input_shape);

  int64_t input_plane() const { return input.h * input.w; }
  int64_t output_plane() const { return output.h * output.w; }
  Shape OutputShape(int64_t out_channels) const { return Shape{out_channels, output.h, output.w}; }
  // The resolved window as the ConvOps geometry of a batch (pools: out_channels = channels and
  // groups = 1).
  Conv2dGeometry Geometry(int64_t batch, int64_t out_channels, int64_t groups) const;
};

// floor((input + 2 * padding - dilation * (kernel - 1) - 1) / stride) + 1; <= 0 when the window
// does not fit.
int64_t WindowOutputSize(int64_t input, int64_t kernel, int64_t stride, int64_t padding,
                         int64_t dilation);

}  // namespace gpipe

#endif  // GPIPE_LAYERS_WINDOW2D_H_
