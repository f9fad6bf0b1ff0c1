// BatchNorm: batch normalization per channel (torch.nn.BatchNorm1d / BatchNorm2d), with GPipe's
// micro-batch semantics.
//
// The per-sample input is [C] or [C, L] (batch_norm1d) or [C, H, W] (batch_norm2d); channel c's
// statistics run over the batch and every remaining position. Training normalizes with the
// call's own batch mean and biased variance: under pipelining a call is one micro-batch, so the
// result depends on the micro-batch size (as in GPipe), never on the number of stages or the
// schedule. When ctx.update_buffers, a training call also updates the running statistics once:
// running = (1 - momentum) * running + momentum * statistic, with the unbiased variance for
// running_var (PyTorch's rule); a re-materialized forward passes update_buffers = false.
// Evaluation normalizes with the running statistics and saves nothing.
//
// Parameters weight [C] (ones) and bias [C] (zeros) with `affine`; buffers running_mean [C]
// (zeros) and running_var [C] (ones). Computed by the device's NormOps (statistics in double).
// Forward saves its input (shared) and the ops' f32 statistics [C, kBatchNormStatsPerChannel].
#ifndef GPIPE_LAYERS_BATCH_NORM_H_
#define GPIPE_LAYERS_BATCH_NORM_H_

#include <memory>

#include "layers/layer.h"
#include "proto/plan.pb.h"
#include "runtime/device/ops/norm_ops.h"

namespace gpipe {

class BatchNorm final : public Layer, public SplitBackward {
 public:
  // Builds batch_norm1d or batch_norm2d (whichever `spec` sets). INVALID_ARGUMENT for an input
  // rank the kind cannot take, eps <= 0 or momentum outside (0, 1].
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);

  std::string_view type() const override { return type_; }
  std::vector<ParamSpec> parameter_specs() const override;
  std::vector<ParamSpec> buffer_specs() const override;
  double ForwardFlopsPerSample() const override;
  // Training on a batch with one value per channel (batch x positions == 1) has no variance:
  // INVALID_ARGUMENT saying to use larger micro-batches, as PyTorch refuses it too.
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  // {kInput, kNew of 4 * kBatchNormStatsPerChannel * C bytes per call}.
  std::vector<SavedSpec> SavedPerSample() const override;
  // With `affine`, Backward is exactly BackwardWeight then BackwardInput, fused into one kernel
  // call (so it is not a SplitBackwardLayer). Without, there is no W; both halves still work.
  const SplitBackward* split_backward() const override { return affine_ ? this : nullptr; }
  absl::StatusOr<Tensor> BackwardInput(const LayerContext& ctx, std::span<const Tensor> params,
                                       const SavedTensors& saved, const Tensor& dy) const override;
  absl::Status BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                              const SavedTensors& saved, const Tensor& dy) const override;

 private:
  BatchNorm(std::string name, const char* type, Shape input_shape, double eps, double momentum,
            bool affine);
  // Checks that `saved` holds a training Forward's tensors and dy matches its output.
  absl::Status CheckOutputGrad(const SavedTensors& saved, const Tensor& dy) const;
  // The ops' arguments for a batch (weight and bias from params with `affine`, undefined when
  // params is empty).
  BatchNormArgs Args(std::span<const Tensor> params, int64_t batch) const;
  // One NormOps::BatchNormBackward: dx when `input` and ctx.need_input_grad (else undefined),
  // the parameter gradients accumulated when `weight` and affine.
  absl::StatusOr<Tensor> RunBackward(const LayerContext& ctx, std::span<const Tensor> params,
                                     std::span<Tensor> grads, const SavedTensors& saved,
                                     const Tensor& dy, bool input, bool weight) const;

  const char* type_;  // "batch_norm1d" or "batch_norm2d"
  int64_t channels_;
  int64_t positions_;  // per sample and channel: L, H * W, or 1
  double eps_;
  double momentum_;
  bool affine_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_BATCH_NORM_H_
