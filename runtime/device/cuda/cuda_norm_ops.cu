// Layer norm and batch norm on the GPU, in the CPU backend's arithmetic (cpu_norm_ops.cc,
// cpu_batch_norm_ops.cc) and with its stats layout: statistics in double, one block per row
// (layer norm) or channel (batch norm) whose threads each sum a fixed stride and combine in a
// fixed tree (block_reduce.cuh), so results are deterministic and agree with the CPU to
// rounding. Parameter gradients of layer norm are column sums over the rows in a fixed order
// (block_reduce.cuh's SumOverColumnLanes).
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/block_reduce.cuh"
#include "runtime/device/cuda/cuda_norm_ops.h"
#include "runtime/device/cuda/device_pointer.h"
#include "runtime/device/cuda/kernel_launch.h"

namespace gpipe {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 2147483647;
// Batch norm stats per channel: the mean as a hi + lo pair, and 1/sqrt(var + eps).
constexpr int kMeanHi = 0;
constexpr int kMeanLo = 1;
constexpr int kInvStd = 2;

__device__ inline float Normalized(float x, float mean_hi, float mean_lo, float rstd) {
  return ((x - mean_hi) - mean_lo) * rstd;
}

__global__ void LayerNormForwardKernel(int64_t first_row, int64_t features, double eps,
                                       const float* x, const float* weight, const float* bias,
                                       float* y, float* stats) {
  __shared__ double scratch[32];
  const int64_t r = first_row + blockIdx.x;
  const float* xr = x + r * features;
  float* yr = y + r * features;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < features; i += blockDim.x) sum += xr[i];
  const double mean =
      cuda::BlockReduce(sum, cuda::SumOp(), scratch) / static_cast<double>(features);
  double squares = 0.0;
  for (int64_t i = threadIdx.x; i < features; i += blockDim.x) {
    const double centered = xr[i] - mean;
    squares += centered * centered;
  }
  squares = cuda::BlockReduce(squares, cuda::SumOp(), scratch);
  const double rstd = 1.0 / sqrt(squares / static_cast<double>(features) + eps);
  const float mean_hi = static_cast<float>(mean);
  const float mean_lo = static_cast<float>(mean - mean_hi);
  const float rstd_f = static_cast<float>(rstd);
  if (threadIdx.x == 0) {
    float* stats_r = stats + kLayerNormStatsPerRow * r;
    stats_r[0] = mean_hi;
    stats_r[1] = mean_lo;
    stats_r[2] = rstd_f;
  }
  for (int64_t i = threadIdx.x; i < features; i += blockDim.x) {
    const float normalized = Normalized(xr[i], mean_hi, mean_lo, rstd_f);
    yr[i] = weight != nullptr ? normalized * weight[i] + bias[i] : normalized;
  }
}

__global__ void LayerNormBackwardInputKernel(int64_t first_row, int64_t features, const float* x,
                                             const float* stats, const float* dy,
                                             const float* weight, float* dx) {
  __shared__ double scratch[32];
  const int64_t r = first_row + blockIdx.x;
  const float* xr = x + r * features;
  const float* gr = dy + r * features;
  float* dxr = dx + r * features;
  const float mean_hi = stats[kLayerNormStatsPerRow * r];
  const float mean_lo = stats[kLayerNormStatsPerRow * r + 1];
  const float rstd = stats[kLayerNormStatsPerRow * r + 2];
  double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
  for (int64_t i = threadIdx.x; i < features; i += blockDim.x) {
    const double dxhat = weight != nullptr ? static_cast<double>(gr[i]) * weight[i] : gr[i];
    sum_dxhat += dxhat;
    sum_dxhat_xhat += dxhat * Normalized(xr[i], mean_hi, mean_lo, rstd);
  }
  const double inv_features = 1.0 / static_cast<double>(features);
  const float mean_dxhat =
      static_cast<float>(cuda::BlockReduce(sum_dxhat, cuda::SumOp(), scratch) * inv_features);
  const float mean_dxhat_xhat =
      static_cast<float>(cuda::BlockReduce(sum_dxhat_xhat, cuda::SumOp(), scratch) * inv_features);
  for (int64_t i = threadIdx.x; i < features; i += blockDim.x) {
    const float dxhat = weight != nullptr ? gr[i] * weight[i] : gr[i];
    const float xhat = Normalized(xr[i], mean_hi, mean_lo, rstd);
    dxr[i] = rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
  }
}

// dweight and dbias: column sums over the rows, 32 features per block and kColumnLanes threads
// down each feature (coalesced), in double, the lanes combined in a fixed order.
__global__ void LayerNormBackwardParamsKernel(int64_t rows, int64_t features, const float* x,
                                              const float* stats, const float* dy, float* dweight,
                                              float* dbias) {
  __shared__ double scratch[2][cuda::kColumnLanes * cuda::kColumnTile];
  for (int64_t tile = blockIdx.x; tile * cuda::kColumnTile < features; tile += gridDim.x) {
    const int64_t i = tile * cuda::kColumnTile + threadIdx.x;
    double weight_sum = 0.0, bias_sum = 0.0;
    if (i < features) {
      for (int64_t r = threadIdx.y; r < rows; r += cuda::kColumnLanes) {
        const float g = dy[r * features + i];
        const float* stats_r = stats + kLayerNormStatsPerRow * r;
        weight_sum += g * Normalized(x[r * features + i], stats_r[0], stats_r[1], stats_r[2]);
        bias_sum += g;
      }
    }
    weight_sum = cuda::SumOverColumnLanes(weight_sum, scratch[0]);
    bias_sum = cuda::SumOverColumnLanes(bias_sum, scratch[1]);
    if (threadIdx.y == 0 && i < features) {
      if (dweight != nullptr) dweight[i] += static_cast<float>(weight_sum);
      if (dbias != nullptr) dbias[i] += static_cast<float>(bias_sum);
    }
  }
}

// The plain values of BatchNormArgs that kernels read (its tensors stay on the host side).
struct BatchNormShape {
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t positions = 1;
  double eps = 0;
  double momentum = 0;
};

// Batch norm: x is [batch, channels, positions]; one block per channel.
__global__ void BatchNormTrainForwardKernel(BatchNormShape args_shape, const float* weight,
                                            const float* bias, const float* x, float* y,
                                            float* stats, float* running_mean, float* running_var,
                                            bool update_running) {
  __shared__ double scratch[32];
  const int64_t c = blockIdx.x;
  const int64_t batch = args_shape.batch, channels = args_shape.channels;
  const int64_t positions = args_shape.positions;
  const int64_t n = batch * positions;
  double sum = 0.0;
  for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
    sum += x[((e / positions) * channels + c) * positions + e % positions];
  }
  const double mean = cuda::BlockReduce(sum, cuda::SumOp(), scratch) / static_cast<double>(n);
  double squares = 0.0;
  for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
    const double d = x[((e / positions) * channels + c) * positions + e % positions] - mean;
    squares += d * d;
  }
  squares = cuda::BlockReduce(squares, cuda::SumOp(), scratch);
  const double inv_std = 1.0 / sqrt(squares / static_cast<double>(n) + args_shape.eps);
  const double scale = inv_std * (weight != nullptr ? weight[c] : 1.0);
  const double shift = bias != nullptr ? bias[c] : 0.0;
  for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
    const int64_t at = ((e / positions) * channels + c) * positions + e % positions;
    y[at] = static_cast<float>((x[at] - mean) * scale + shift);
  }
  if (threadIdx.x == 0) {
    const float mean_hi = static_cast<float>(mean);
    stats[c * kBatchNormStatsPerChannel + kMeanHi] = mean_hi;
    stats[c * kBatchNormStatsPerChannel + kMeanLo] = static_cast<float>(mean - mean_hi);
    stats[c * kBatchNormStatsPerChannel + kInvStd] = static_cast<float>(inv_std);
    if (update_running) {
      const double unbiased = squares / static_cast<double>(n - 1);
      const double momentum = args_shape.momentum;
      running_mean[c] = static_cast<float>((1.0 - momentum) * running_mean[c] + momentum * mean);
      running_var[c] = static_cast<float>((1.0 - momentum) * running_var[c] + momentum * unbiased);
    }
  }
}

__global__ void BatchNormEvalForwardKernel(int64_t total, int64_t channels, int64_t positions,
                                           double eps, const float* weight, const float* bias,
                                           const float* mean, const float* var, const float* x,
                                           float* y) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = (e / positions) % channels;
    const double inv_std = 1.0 / sqrt(static_cast<double>(var[c]) + eps);
    const double scale = inv_std * (weight != nullptr ? weight[c] : 1.0);
    const double shift = bias != nullptr ? bias[c] : 0.0;
    y[e] = static_cast<float>((x[e] - static_cast<double>(mean[c])) * scale + shift);
  }
}

__global__ void BatchNormBackwardKernel(BatchNormShape args_shape, const float* weight,
                                        const float* x, const float* stats, const float* dy,
                                        float* dx, float* dweight, float* dbias) {
  __shared__ double scratch[32];
  const int64_t c = blockIdx.x;
  const int64_t channels = args_shape.channels, positions = args_shape.positions;
  const int64_t n = args_shape.batch * positions;
  const double mean = static_cast<double>(stats[c * kBatchNormStatsPerChannel + kMeanHi]) +
                      stats[c * kBatchNormStatsPerChannel + kMeanLo];
  const double inv_std = stats[c * kBatchNormStatsPerChannel + kInvStd];
  double sum_dy = 0.0, sum_dy_xhat = 0.0;
  for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
    const int64_t at = ((e / positions) * channels + c) * positions + e % positions;
    sum_dy += dy[at];
    sum_dy_xhat += dy[at] * ((x[at] - mean) * inv_std);
  }
  sum_dy = cuda::BlockReduce(sum_dy, cuda::SumOp(), scratch);
  sum_dy_xhat = cuda::BlockReduce(sum_dy_xhat, cuda::SumOp(), scratch);
  if (threadIdx.x == 0) {
    if (dweight != nullptr) dweight[c] += static_cast<float>(sum_dy_xhat);
    if (dbias != nullptr) dbias[c] += static_cast<float>(sum_dy);
  }
  if (dx == nullptr) return;
  const double scale = inv_std * (weight != nullptr ? weight[c] : 1.0);
  const double mean_dy = sum_dy / static_cast<double>(n);
  const double mean_dy_xhat = sum_dy_xhat / static_cast<double>(n);
  for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
    const int64_t at = ((e / positions) * channels + c) * positions + e % positions;
    const double x_hat = (x[at] - mean) * inv_std;
    dx[at] = static_cast<float>(scale * (dy[at] - mean_dy - x_hat * mean_dy_xhat));
  }
}

BatchNormShape ShapeOf(const BatchNormArgs& args) {
  return {.batch = args.batch,
          .channels = args.channels,
          .positions = args.positions,
          .eps = args.eps,
          .momentum = args.momentum};
}

// One block per channel: a layer's channel count is far below the 2^31 - 1 block limit, which
// is checked rather than assumed.
absl::Status CheckChannelBlocks(const char* op, int64_t channels) {
  if (channels > kMaxBlocks) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", channels, " channels exceed ", kMaxBlocks, " (one GPU block each)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CudaNormOps::DoLayerNormForward(const LayerNormArgs& args, const Tensor& x, Tensor& y,
                                             Tensor& stats) const {
  const float* weight = DevicePointer<float>(args.weight);
  const float* bias = DevicePointer<float>(args.bias);
  return cuda::ForEachRowChunk(args.rows, "layer norm forward", [&](int64_t first, unsigned count) {
    LayerNormForwardKernel<<<count, kThreads, 0, context_.stream>>>(
        first, args.features, args.eps, DevicePointer<float>(x), weight, bias,
        DevicePointer<float>(y), DevicePointer<float>(stats));
  });
}

absl::Status CudaNormOps::DoLayerNormBackwardInput(const LayerNormArgs& args, const Tensor& x,
                                                   const Tensor& stats, const Tensor& dy,
                                                   Tensor& dx) const {
  if (!dx.defined()) return absl::OkStatus();
  const float* weight = DevicePointer<float>(args.weight);
  return cuda::ForEachRowChunk(
      args.rows, "layer norm backward input", [&](int64_t first, unsigned count) {
        LayerNormBackwardInputKernel<<<count, kThreads, 0, context_.stream>>>(
            first, args.features, DevicePointer<float>(x), DevicePointer<float>(stats),
            DevicePointer<float>(dy), weight, DevicePointer<float>(dx));
      });
}

absl::Status CudaNormOps::DoLayerNormBackwardParams(const LayerNormArgs& args, const Tensor& x,
                                                    const Tensor& stats, const Tensor& dy,
                                                    Tensor& dweight, Tensor& dbias) const {
  if (!dweight.defined() && !dbias.defined()) return absl::OkStatus();
  const dim3 threads(cuda::kColumnTile, cuda::kColumnLanes);
  LayerNormBackwardParamsKernel<<<cuda::BlocksFor(args.features, cuda::kColumnTile), threads, 0,
                                  context_.stream>>>(
      args.rows, args.features, DevicePointer<float>(x), DevicePointer<float>(stats),
      DevicePointer<float>(dy), DevicePointer<float>(dweight), DevicePointer<float>(dbias));
  return cuda::LaunchStatus("layer norm backward params");
}

absl::Status CudaNormOps::DoBatchNormTrainForward(const BatchNormArgs& args, const Tensor& x,
                                                  Tensor& running_mean, Tensor& running_var,
                                                  bool update_running, Tensor& y,
                                                  Tensor& stats) const {
  RETURN_IF_ERROR(CheckChannelBlocks("BatchNormTrainForward", args.channels));
  BatchNormTrainForwardKernel<<<static_cast<unsigned>(args.channels), kThreads, 0,
                                context_.stream>>>(
      ShapeOf(args), DevicePointer<float>(args.weight), DevicePointer<float>(args.bias),
      DevicePointer<float>(x), DevicePointer<float>(y), DevicePointer<float>(stats),
      DevicePointer<float>(running_mean), DevicePointer<float>(running_var), update_running);
  return cuda::LaunchStatus("batch norm forward");
}

absl::Status CudaNormOps::DoBatchNormEvalForward(const BatchNormArgs& args, const Tensor& x,
                                                 const Tensor& running_mean,
                                                 const Tensor& running_var, Tensor& y) const {
  const int64_t total = args.batch * args.channels * args.positions;
  if (total == 0) return absl::OkStatus();
  BatchNormEvalForwardKernel<<<cuda::BlocksFor(total), cuda::kThreadsPerBlock, 0,
                               context_.stream>>>(
      total, args.channels, args.positions, args.eps, DevicePointer<float>(args.weight),
      DevicePointer<float>(args.bias), DevicePointer<float>(running_mean),
      DevicePointer<float>(running_var), DevicePointer<float>(x), DevicePointer<float>(y));
  return cuda::LaunchStatus("batch norm eval forward");
}

absl::Status CudaNormOps::DoBatchNormBackward(const BatchNormArgs& args, const Tensor& x,
                                              const Tensor& stats, const Tensor& dy, Tensor& dx,
                                              Tensor& dweight, Tensor& dbias) const {
  RETURN_IF_ERROR(CheckChannelBlocks("BatchNormBackward", args.channels));
  BatchNormBackwardKernel<<<static_cast<unsigned>(args.channels), kThreads, 0, context_.stream>>>(
      ShapeOf(args), DevicePointer<float>(args.weight), DevicePointer<float>(x),
      DevicePointer<float>(stats), DevicePointer<float>(dy), DevicePointer<float>(dx),
      DevicePointer<float>(dweight), DevicePointer<float>(dbias));
  return cuda::LaunchStatus("batch norm backward");
}

}  // namespace gpipe
