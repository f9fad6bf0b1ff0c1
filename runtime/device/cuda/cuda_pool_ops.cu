// CudaConvOps' pools: the CPU backend's rules (cpu_pool_ops.cc) element for element. Forward: one
// thread per output, taps in row-major window order (float sums, max with NaN winning and
// padding never winning). Backward gathers instead of scattering: one thread per input element
// adds the shares of the windows that cover it in increasing window order, which is the order
// the CPU's scatter adds them in, so dx has the CPU's bits.
#include <cstdint>

#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_conv_ops.h"
#include "runtime/device/cuda/device_pointer.h"
#include "runtime/device/cuda/kernel_launch.h"
#include "runtime/device/ops/conv_shapes.h"

namespace gpipe {
namespace {

__host__ __device__ inline int64_t FloorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
__host__ __device__ inline int64_t CeilDiv(int64_t a, int64_t b) { return -FloorDiv(-a, b); }

// The kernel taps [begin, end) of output position o along one axis that land inside the input.
struct TapRange {
  int64_t begin, end;
};

__device__ inline TapRange InBounds(int64_t o, int64_t kernel, int64_t stride, int64_t padding,
                                    int64_t dilation, int64_t limit) {
  const int64_t start = o * stride - padding;
  int64_t begin = CeilDiv(-start, dilation);
  begin = begin < 0 ? 0 : (begin > kernel ? kernel : begin);
  int64_t end = FloorDiv(limit - 1 - start, dilation) + 1;
  end = end > kernel ? kernel : end;
  return {begin, end > begin ? end : begin};
}

struct Window {
  int64_t first;  // flat plane index of the first in-bounds tap
  int64_t rows, cols;
};

__device__ inline Window WindowOf(const Conv2dGeometry& g, int64_t oh, int64_t ow) {
  const TapRange r = InBounds(oh, g.kernel_h, g.stride_h, g.padding_h, g.dilation_h, g.in_h);
  const TapRange c = InBounds(ow, g.kernel_w, g.stride_w, g.padding_w, g.dilation_w, g.in_w);
  const int64_t rows = r.end - r.begin, cols = c.end - c.begin;
  if (rows == 0 || cols == 0) return {0, 0, 0};
  const int64_t top = oh * g.stride_h - g.padding_h + r.begin * g.dilation_h;
  const int64_t left = ow * g.stride_w - g.padding_w + c.begin * g.dilation_w;
  return {top * g.in_w + left, rows, cols};
}

__device__ inline float Divisor(PoolKind kind, const Conv2dGeometry& g, const Window& w) {
  if (kind == PoolKind::kAvg) return static_cast<float>(g.kernel_h * g.kernel_w);
  return static_cast<float>(w.rows * w.cols);
}

__device__ inline float WindowMax(const float* plane, const Conv2dGeometry& g, const Window& w) {
  float best = -INFINITY;
  bool any_nan = false;
  for (int64_t i = 0; i < w.rows; ++i) {
    for (int64_t j = 0; j < w.cols; ++j) {
      const float v = plane[w.first + i * g.dilation_h * g.in_w + j * g.dilation_w];
      best = v > best ? v : best;
      any_nan |= v != v;
    }
  }
  return any_nan ? NAN : best;
}

// The first tap (row-major) equal to `max`, or the first NaN tap when `max` is NaN; -1 if none.
__device__ inline int64_t FirstIndexOf(float max, const float* plane, const Conv2dGeometry& g,
                                       const Window& w) {
  const bool nan = max != max;
  for (int64_t i = 0; i < w.rows; ++i) {
    for (int64_t j = 0; j < w.cols; ++j) {
      const int64_t index = w.first + i * g.dilation_h * g.in_w + j * g.dilation_w;
      const float v = plane[index];
      if (v == max || (nan && v != v)) return index;
    }
  }
  return -1;
}

__global__ void PoolForwardKernel(PoolKind kind, Conv2dGeometry g, const float* x, float* y) {
  const int64_t out_plane = g.out_h * g.out_w;
  const int64_t total = g.batch * g.in_channels * out_plane;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t p = e / out_plane;
    const int64_t oh = (e % out_plane) / g.out_w, ow = e % g.out_w;
    const float* plane = x + p * g.in_h * g.in_w;
    const Window w = WindowOf(g, oh, ow);
    if (kind == PoolKind::kMax) {
      y[e] = WindowMax(plane, g, w);
      continue;
    }
    float sum = 0.0f;
    for (int64_t i = 0; i < w.rows; ++i) {
      for (int64_t j = 0; j < w.cols; ++j) {
        sum += plane[w.first + i * g.dilation_h * g.in_w + j * g.dilation_w];
      }
    }
    y[e] = sum / Divisor(kind, g, w);
  }
}

// The output positions along one axis whose window can cover input position `at`.
__device__ inline void CoveringRange(int64_t at, int64_t kernel, int64_t stride, int64_t padding,
                                     int64_t dilation, int64_t out, int64_t* first, int64_t* last) {
  const int64_t lo = CeilDiv(at + padding - (kernel - 1) * dilation, stride);
  const int64_t hi = FloorDiv(at + padding, stride);
  *first = lo < 0 ? 0 : lo;
  *last = hi >= out ? out - 1 : hi;
}

__global__ void PoolBackwardKernel(PoolKind kind, Conv2dGeometry g, const float* x, const float* y,
                                   const float* dy, float* dx) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const int64_t total = g.batch * g.in_channels * in_plane;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t p = e / in_plane;
    const int64_t index = e % in_plane;
    const int64_t ih = index / g.in_w, iw = index % g.in_w;
    int64_t oh_first, oh_last, ow_first, ow_last;
    CoveringRange(ih, g.kernel_h, g.stride_h, g.padding_h, g.dilation_h, g.out_h, &oh_first,
                  &oh_last);
    CoveringRange(iw, g.kernel_w, g.stride_w, g.padding_w, g.dilation_w, g.out_w, &ow_first,
                  &ow_last);
    const float* plane = kind == PoolKind::kMax ? x + p * in_plane : nullptr;
    float sum = 0.0f;
    for (int64_t oh = oh_first; oh <= oh_last; ++oh) {
      if ((ih + g.padding_h - oh * g.stride_h) % g.dilation_h != 0) continue;
      for (int64_t ow = ow_first; ow <= ow_last; ++ow) {
        if ((iw + g.padding_w - ow * g.stride_w) % g.dilation_w != 0) continue;
        const Window w = WindowOf(g, oh, ow);
        const int64_t o = p * out_plane + oh * g.out_w + ow;
        if (kind == PoolKind::kMax) {
          if (FirstIndexOf(y[o], plane, g, w) == index) sum += dy[o];
        } else {
          sum += dy[o] / Divisor(kind, g, w);
        }
      }
    }
    dx[e] = sum;
  }
}

// One thread per plane, summed in double in order: the CPU backend's bits.
__global__ void GlobalAvgForwardKernel(const float* x, int64_t planes, int64_t plane, float* y) {
  for (int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; p < planes;
       p += int64_t{gridDim.x} * blockDim.x) {
    double sum = 0.0;
    for (int64_t i = 0; i < plane; ++i) sum += x[p * plane + i];
    y[p] = static_cast<float>(sum / static_cast<double>(plane));
  }
}

__global__ void GlobalAvgBackwardKernel(const float* dy, int64_t total, int64_t plane, float size,
                                        float* dx) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    dx[e] = dy[e / plane] / size;
  }
}

}  // namespace

absl::Status CudaConvOps::DoPool2dForward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                                          Tensor& y) const {
  const int64_t total = y.num_elements();
  if (total == 0) return absl::OkStatus();
  PoolForwardKernel<<<cuda::BlocksFor(total), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      kind, g, DevicePointer<float>(x), DevicePointer<float>(y));
  return cuda::LaunchStatus("pool forward");
}

absl::Status CudaConvOps::DoPool2dBackward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                                           const Tensor& y, const Tensor& dy, Tensor& dx) const {
  const int64_t total = dx.num_elements();
  if (total == 0) return absl::OkStatus();
  const bool max = kind == PoolKind::kMax;
  PoolBackwardKernel<<<cuda::BlocksFor(total), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      kind, g, max ? DevicePointer<float>(x) : nullptr, max ? DevicePointer<float>(y) : nullptr,
      DevicePointer<float>(dy), DevicePointer<float>(dx));
  return cuda::LaunchStatus("pool backward");
}

absl::Status CudaConvOps::DoGlobalAvgPool2dForward(const Tensor& x, Tensor& y) const {
  const Shape& s = x.shape();
  const int64_t planes = s.dim(0) * s.dim(1);
  if (planes == 0) return absl::OkStatus();
  GlobalAvgForwardKernel<<<cuda::BlocksFor(planes, 128), 128, 0, context_.stream>>>(
      DevicePointer<float>(x), planes, s.dim(2) * s.dim(3), DevicePointer<float>(y));
  return cuda::LaunchStatus("global average pool forward");
}

absl::Status CudaConvOps::DoGlobalAvgPool2dBackward(const Tensor& dy, Tensor& dx) const {
  const Shape& s = dx.shape();
  const int64_t plane = s.dim(2) * s.dim(3);
  const int64_t total = dx.num_elements();
  if (total == 0) return absl::OkStatus();
  GlobalAvgBackwardKernel<<<cuda::BlocksFor(total), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      DevicePointer<float>(dy), total, plane, static_cast<float>(plane), DevicePointer<float>(dx));
  return cuda::LaunchStatus("global average pool backward");
}

}  // namespace gpipe
