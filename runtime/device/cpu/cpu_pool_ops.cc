// CpuConvOps' pools: loops over each [H, W] plane. A window's taps that land in the padding are
// left out; max pooling never lets the padding win and averages divide by the whole kernel or
// by the covered elements. These are the arithmetic of the former layer loops, unchanged.
#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cpu/cpu_conv_ops.h"
#include "runtime/device/ops/conv_shapes.h"

namespace gpipe {
namespace {

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t CeilDiv(int64_t a, int64_t b) { return -FloorDiv(-a, b); }

// The kernel taps [begin, end) of one output row (column) that land inside the input.
struct TapRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

TapRange InBounds(int64_t count, int64_t start, int64_t step, int64_t limit) {
  const int64_t begin = std::clamp<int64_t>(CeilDiv(-start, step), 0, count);
  const int64_t end = std::min<int64_t>(count, FloorDiv(limit - 1 - start, step) + 1);
  return {begin, std::max(begin, end)};
}

// The taps of every window of a geometry: window (oh, ow) covers rows x cols input elements,
// the first at flat index `first` of its plane, the others every row_step and col_step.
class PoolWindows {
 public:
  struct Taps {
    int64_t first = 0;
    int64_t rows = 0;
    int64_t cols = 0;
  };

  explicit PoolWindows(const Conv2dGeometry& g)
      : row_step(g.dilation_h * g.in_w), col_step(g.dilation_w), g_(g) {
    for (int64_t o = 0; o < g.out_h; ++o) {
      rows_.push_back(InBounds(g.kernel_h, o * g.stride_h - g.padding_h, g.dilation_h, g.in_h));
    }
    for (int64_t o = 0; o < g.out_w; ++o) {
      cols_.push_back(InBounds(g.kernel_w, o * g.stride_w - g.padding_w, g.dilation_w, g.in_w));
    }
  }

  Taps Of(int64_t oh, int64_t ow) const {
    const TapRange rows = rows_[oh];
    const TapRange cols = cols_[ow];
    if (rows.size() == 0 || cols.size() == 0) return {};
    const int64_t top = oh * g_.stride_h - g_.padding_h + rows.begin * g_.dilation_h;
    const int64_t left = ow * g_.stride_w - g_.padding_w + cols.begin * g_.dilation_w;
    return {top * g_.in_w + left, rows.size(), cols.size()};
  }

  // The divisor of an average over these taps.
  float Divisor(PoolKind kind, const Taps& taps) const {
    // In floor mode no window reaches past the padding, so the padded window is the kernel;
    // padding <= kernel / 2 leaves every window at least one input element.
    if (kind == PoolKind::kAvg) return static_cast<float>(g_.kernel_h * g_.kernel_w);
    return static_cast<float>(taps.rows * taps.cols);
  }

  const int64_t row_step;  // between vertically adjacent taps in a plane
  const int64_t col_step;  // between horizontally adjacent taps

 private:
  const Conv2dGeometry& g_;
  std::vector<TapRange> rows_;
  std::vector<TapRange> cols_;
};

// The maximum of a window's taps: NaN if any tap is NaN (PyTorch propagates it), -infinity when
// there are none. Branch-free (a maxss per tap): which tap wins is data-dependent and would
// mispredict.
inline float WindowMax(const float* plane, const PoolWindows::Taps& t, int64_t row_step,
                       int64_t col_step) {
  float best = -std::numeric_limits<float>::infinity();
  bool any_nan = false;
  for (int64_t i = 0; i < t.rows; ++i) {
    const float* row = plane + t.first + i * row_step;
    for (int64_t j = 0; j < t.cols; ++j) {
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
inline int64_t FirstIndexOf(float max, const float* plane, const PoolWindows::Taps& t,
                            int64_t row_step, int64_t col_step) {
  const bool nan = max != max;
  int64_t found = -1;
  for (int64_t i = t.rows - 1; i >= 0; --i) {
    for (int64_t j = t.cols - 1; j >= 0; --j) {
      const int64_t index = t.first + i * row_step + j * col_step;
      const float v = plane[index];
      // found = match ? index : found, as a mask: compilers turn the ternary into a branch.
      const int64_t match = static_cast<int64_t>(v == max) | static_cast<int64_t>(nan & (v != v));
      found += (index - found) & -match;
    }
  }
  return found;
}

}  // namespace

absl::Status CpuConvOps::DoPool2dForward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                                         Tensor& y) const {
  const PoolWindows windows(g);
  const int64_t planes = g.batch * g.in_channels;
  const int64_t in_plane = g.in_h * g.in_w;
  const int64_t out_plane = g.out_h * g.out_w;
  for (int64_t p = 0; p < planes; ++p) {
    const float* in = x.f32() + p * in_plane;
    float* out = y.f32() + p * out_plane;
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        const PoolWindows::Taps taps = windows.Of(oh, ow);
        if (kind == PoolKind::kMax) {
          *out++ = WindowMax(in, taps, windows.row_step, windows.col_step);
          continue;
        }
        float sum = 0.0f;
        for (int64_t i = 0; i < taps.rows; ++i) {
          const float* row = in + taps.first + i * windows.row_step;
          for (int64_t j = 0; j < taps.cols; ++j) sum += row[j * windows.col_step];
        }
        *out++ = sum / windows.Divisor(kind, taps);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CpuConvOps::DoPool2dBackward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                                          const Tensor& y, const Tensor& dy, Tensor& dx) const {
  const PoolWindows windows(g);
  const int64_t planes = g.batch * g.in_channels;
  const int64_t in_plane = g.in_h * g.in_w;
  const int64_t out_plane = g.out_h * g.out_w;
  std::fill(dx.f32(), dx.f32() + dx.num_elements(), 0.0f);
  for (int64_t p = 0; p < planes; ++p) {
    const float* grad = dy.f32() + p * out_plane;
    float* d = dx.f32() + p * in_plane;
    if (kind == PoolKind::kMax) {
      const float* in = x.f32() + p * in_plane;
      const float* max = y.f32() + p * out_plane;
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        for (int64_t ow = 0; ow < g.out_w; ++ow, ++max, ++grad) {
          const int64_t index =
              FirstIndexOf(*max, in, windows.Of(oh, ow), windows.row_step, windows.col_step);
          if (index >= 0) d[index] += *grad;
        }
      }
      continue;
    }
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        const PoolWindows::Taps taps = windows.Of(oh, ow);
        const float share = *grad++ / windows.Divisor(kind, taps);
        for (int64_t i = 0; i < taps.rows; ++i) {
          float* row = d + taps.first + i * windows.row_step;
          for (int64_t j = 0; j < taps.cols; ++j) row[j * windows.col_step] += share;
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CpuConvOps::DoGlobalAvgPool2dForward(const Tensor& x, Tensor& y) const {
  const Shape& s = x.shape();
  const int64_t planes = s.dim(0) * s.dim(1);
  const int64_t plane = s.dim(2) * s.dim(3);
  const float* in = x.f32();
  float* out = y.f32();
  for (int64_t p = 0; p < planes; ++p, in += plane) {
    double sum = 0.0;
    for (int64_t i = 0; i < plane; ++i) sum += in[i];
    out[p] = static_cast<float>(sum / static_cast<double>(plane));
  }
  return absl::OkStatus();
}

absl::Status CpuConvOps::DoGlobalAvgPool2dBackward(const Tensor& dy, Tensor& dx) const {
  const Shape& s = dx.shape();
  const int64_t planes = s.dim(0) * s.dim(1);
  const int64_t plane = s.dim(2) * s.dim(3);
  const float* grad = dy.f32();
  float* out = dx.f32();
  const float size = static_cast<float>(plane);
  for (int64_t p = 0; p < planes; ++p, out += plane) std::fill(out, out + plane, grad[p] / size);
  return absl::OkStatus();
}

}  // namespace gpipe
