#include "layers/window2d.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpipe {
namespace {

// Floor of a / b for b > 0 (C++ division truncates toward zero).
int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

std::string HwString(Hw hw) { return absl::StrCat(hw.h, "x", hw.w); }

}  // namespace

absl::StatusOr<Hw> ParseHw(const google::protobuf::RepeatedField<int64_t>& values,
                           absl::string_view field, int64_t min_value, std::optional<Hw> fallback) {
  if (values.empty() && fallback.has_value()) return *fallback;
  const bool in_range =
      std::all_of(values.begin(), values.end(), [min_value](int64_t v) { return v >= min_value; });
  if (values.size() < 1 || values.size() > 2 || !in_range) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " needs 1 or 2 values >= ", min_value, ", got ",
                     values.empty() ? "none" : absl::StrCat("[", absl::StrJoin(values, ", "), "]"),
                     "; give one value for both height and width, or two (height, width)"));
  }
  return values.size() == 1 ? Hw{values[0], values[0]} : Hw{values[0], values[1]};
}

absl::Status CheckPaddingAtMostHalfKernel(absl::string_view field, Hw padding, Hw kernel) {
  if (padding.h > kernel.h / 2 || padding.w > kernel.w / 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be at most half the kernel size (kernel ", HwString(kernel),
                     " allows padding up to ", HwString({kernel.h / 2, kernel.w / 2}), "), got ",
                     HwString(padding), "; lower the padding or enlarge the kernel"));
  }
  return absl::OkStatus();
}

absl::Status CheckChannelsHeightWidth(absl::string_view kind, const Shape& input_shape) {
  const std::vector<int64_t>& dims = input_shape.dims();
  if (input_shape.rank() != 3 ||
      std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d < 1; })) {
    return absl::InvalidArgumentError(absl::StrCat(
        kind, " needs a per-sample input [channels, height, width] with every dimension >= 1, got ",
        input_shape.ToString(), "; put a layer before it that gives such a shape"));
  }
  return absl::OkStatus();
}

int64_t WindowOutputSize(int64_t input, int64_t kernel, int64_t stride, int64_t padding,
                         int64_t dilation) {
  return FloorDiv(input + 2 * padding - dilation * (kernel - 1) - 1, stride) + 1;
}

absl::Status Window2d::Resolve(absl::string_view kind, const Shape& input_shape) {
  if (absl::Status status = CheckChannelsHeightWidth(kind, input_shape); !status.ok()) {
    return status;
  }
  channels = input_shape.dim(0);
  input = {input_shape.dim(1), input_shape.dim(2)};
  output = {WindowOutputSize(input.h, kernel.h, stride.h, padding.h, dilation.h),
            WindowOutputSize(input.w, kernel.w, stride.w, padding.w, dilation.w)};
  if (output.h < 1 || output.w < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kind, ": input ", input_shape.ToString(), " is too small for kernel ",
                     HwString(kernel), " with padding ", HwString(padding), " and dilation ",
                     HwString(dilation), " (the output would be ",
                     HwString({std::max<int64_t>(output.h, 0), std::max<int64_t>(output.w, 0)}),
                     "); use a larger input, more padding, a smaller kernel or less dilation"));
  }
  return absl::OkStatus();
}

Conv2dGeometry Window2d::Geometry(int64_t batch, int64_t out_channels, int64_t groups) const {
  return Conv2dGeometry{.batch = batch,
                        .in_channels = channels,
                        .in_h = input.h,
                        .in_w = input.w,
                        .out_channels = out_channels,
                        .out_h = output.h,
                        .out_w = output.w,
                        .kernel_h = kernel.h,
                        .kernel_w = kernel.w,
                        .stride_h = stride.h,
                        .stride_w = stride.w,
                        .padding_h = padding.h,
                        .padding_w = padding.w,
                        .dilation_h = dilation.h,
                        .dilation_w = dilation.w,
                        .groups = groups};
}

}  // namespace gpipe
