// NormOps: layer norm and RMS norm (over the last dimension) and batch norm (per channel over
// batch and positions, GPipe's micro-batch statistics, running buffers). See runtime/device/ops.h
// for the common contract. Statistics are computed in double; what backward needs is kept in a
// small f32 `stats` tensor whose layout belongs to the backend (only its size is fixed here). Each
// public entry checks its arguments (the same INVALID_ARGUMENT on every backend) and then runs the
// backend's protected Do kernel.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_NORM_OPS_H_
#define GPIPE_RUNTIME_DEVICE_OPS_NORM_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/core/tensor.h"

namespace gpipe {

// f32 values kept per normalized row (layer norm) or channel (batch norm).
inline constexpr int64_t kLayerNormStatsPerRow = 3;
inline constexpr int64_t kBatchNormStatsPerChannel = 3;
// RMS norm keeps one: the row's f32 rstd = 1 / sqrt(mean(x^2) + eps).
inline constexpr int64_t kRmsNormStatsPerRow = 1;

struct LayerNormArgs {
  int64_t rows = 0;
  int64_t features = 0;
  double eps = 1e-5;
  // f32 [features] each, or undefined tensors for a norm without affine parameters.
  Tensor weight;
  Tensor bias;
};

struct RmsNormArgs {
  int64_t rows = 0;
  int64_t features = 0;
  double eps = 1e-6;
  Tensor weight;  // f32 [features]; RMS norm always has it
};

struct BatchNormArgs {
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t positions = 1;  // elements per channel per sample (H * W; 1 for batch_norm1d)
  double eps = 1e-5;
  double momentum = 0.1;
  Tensor weight;  // f32 [channels], or undefined (no affine)
  Tensor bias;
};

class NormOps {
 public:
  virtual ~NormOps() = default;

  // y = (x - mean) / sqrt(var + eps) (* weight + bias) per row of x [rows, features];
  // stats: f32 [rows, kLayerNormStatsPerRow].
  absl::Status LayerNormForward(const LayerNormArgs& args, const Tensor& x, Tensor& y,
                                Tensor& stats) const;
  // dx from dy, x and stats (dx undefined: skipped).
  absl::Status LayerNormBackwardInput(const LayerNormArgs& args, const Tensor& x,
                                      const Tensor& stats, const Tensor& dy, Tensor& dx) const;
  // dweight += sum over rows of dy * xhat, dbias += sum of dy (double sums, added once); each
  // skipped when undefined. args.weight and args.bias are not read.
  absl::Status LayerNormBackwardParams(const LayerNormArgs& args, const Tensor& x,
                                       const Tensor& stats, const Tensor& dy, Tensor& dweight,
                                       Tensor& dbias) const;

  // y = (x * rstd) * weight per row of x [rows, features], rstd = 1 / sqrt(mean(x^2) + eps) with
  // the mean square summed in double and rstd rounded to f32 (Hugging Face's LlamaRMSNorm in
  // f32); stats: f32 [rows, kRmsNormStatsPerRow] holding rstd.
  absl::Status RmsNormForward(const RmsNormArgs& args, const Tensor& x, Tensor& y,
                              Tensor& stats) const;
  // dx = rstd * (g - xhat * mean(g * xhat)) with g = dy * weight and xhat = x * rstd (row sums
  // in double), from x, stats and dy.
  absl::Status RmsNormBackwardInput(const RmsNormArgs& args, const Tensor& x, const Tensor& stats,
                                    const Tensor& dy, Tensor& dx) const;
  // dweight += sum over rows of dy * xhat (double sums, added once). args.weight is not read.
  absl::Status RmsNormBackwardParams(const RmsNormArgs& args, const Tensor& x, const Tensor& stats,
                                     const Tensor& dy, Tensor& dweight) const;

  // Training: normalizes x [batch, channels, positions] with this call's statistics (biased
  // variance), saves what backward needs in stats (f32 [channels, kBatchNormStatsPerChannel]),
  // and, when update_running, updates running_mean/running_var (f32 [channels]) as PyTorch
  // does (unbiased variance, `momentum`).
  absl::Status BatchNormTrainForward(const BatchNormArgs& args, const Tensor& x,
                                     Tensor& running_mean, Tensor& running_var, bool update_running,
                                     Tensor& y, Tensor& stats) const;
  // Evaluation: normalizes with the running statistics.
  absl::Status BatchNormEvalForward(const BatchNormArgs& args, const Tensor& x,
                                    const Tensor& running_mean, const Tensor& running_var,
                                    Tensor& y) const;
  // Backward of the training forward: dx (undefined: skipped; reads args.weight when defined)
  // and dweight/dbias accumulated (undefined: skipped; the two halves, or both at once, give
  // the same bits).
  absl::Status BatchNormBackward(const BatchNormArgs& args, const Tensor& x, const Tensor& stats,
                                 const Tensor& dy, Tensor& dx, Tensor& dweight,
                                 Tensor& dbias) const;

 protected:
  // The backend's kernels, one per entry above, called only with arguments the entry has
  // checked (the same INVALID_ARGUMENT messages on every backend).
  virtual absl::Status DoLayerNormForward(const LayerNormArgs& args, const Tensor& x, Tensor& y,
                                          Tensor& stats) const = 0;
  virtual absl::Status DoLayerNormBackwardInput(const LayerNormArgs& args, const Tensor& x,
                                                const Tensor& stats, const Tensor& dy,
                                                Tensor& dx) const = 0;
  virtual absl::Status DoLayerNormBackwardParams(const LayerNormArgs& args, const Tensor& x,
                                                 const Tensor& stats, const Tensor& dy,
                                                 Tensor& dweight, Tensor& dbias) const = 0;
  virtual absl::Status DoRmsNormForward(const RmsNormArgs& args, const Tensor& x, Tensor& y,
                                        Tensor& stats) const = 0;
  virtual absl::Status DoRmsNormBackwardInput(const RmsNormArgs& args, const Tensor& x,
                                              const Tensor& stats, const Tensor& dy,
                                              Tensor& dx) const = 0;
  virtual absl::Status DoRmsNormBackwardParams(const RmsNormArgs& args, const Tensor& x,
                                               const Tensor& stats, const Tensor& dy,
                                               Tensor& dweight) const = 0;
  virtual absl::Status DoBatchNormTrainForward(const BatchNormArgs& args, const Tensor& x,
                                               Tensor& running_mean, Tensor& running_var,
                                               bool update_running, Tensor& y,
                                               Tensor& stats) const = 0;
  virtual absl::Status DoBatchNormEvalForward(const BatchNormArgs& args, const Tensor& x,
                                              const Tensor& running_mean, const Tensor& running_var,
                                              Tensor& y) const = 0;
  virtual absl::Status DoBatchNormBackward(const BatchNormArgs& args, const Tensor& x,
                                           const Tensor& stats, const Tensor& dy, Tensor& dx,
                                           Tensor& dweight, Tensor& dbias) const = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_NORM_OPS_H_
