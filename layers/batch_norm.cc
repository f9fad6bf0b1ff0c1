#include "layers/batch_norm.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {
absl::StatusOr<std::unique_ptr<Layer>> BatchNorm::Create(const pb::Layer& spec,
                                                         const Shape& input_shape) {
  const bool two_d = spec.has_batch_norm2d();
  const pb::BatchNorm& config = two_d ? spec.batch_norm2d() : spec.batch_norm1d();
  const char* type = two_d ? "batch_norm2d" : "batch_norm1d";
  if (two_d ? input_shape.rank() != 3 : (input_shape.rank() < 1 || input_shape.rank() > 2)) {
    return absl::InvalidArgumentError(absl::StrCat(
        type, " needs a per-sample input of shape ",
        two_d ? "[channels, height, width]" : "[channels] or [channels, length]", ", got ",
        input_shape.ToString(),
        two_d ? "; use batch_norm1d for [C] or [C, L]" : "; use batch_norm2d for [C, H, W]"));
  }
  for (int64_t dim : input_shape.dims()) {
    if (dim < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(type, " needs every input dimension >= 1, got ", input_shape.ToString()));
    }
  }
  if (!(config.eps() > 0.0) || !std::isfinite(config.eps())) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, ".eps must be a finite number > 0, got ", config.eps()));
  }
  if (!(config.momentum() > 0.0 && config.momentum() <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, ".momentum must be in (0, 1], got ", config.momentum()));
  }
  return std::unique_ptr<Layer>(new BatchNorm(spec.name(), type, input_shape, config.eps(),
                                              config.momentum(), config.affine()));
}

BatchNorm::BatchNorm(std::string name, const char* type, Shape input_shape, double eps,
                     double momentum, bool affine)
    : Layer(std::move(name), input_shape, input_shape),
      type_(type),
      channels_(input_shape.dim(0)),
      positions_(input_shape.num_elements() / input_shape.dim(0)),
      eps_(eps),
      momentum_(momentum),
      affine_(affine) {}

std::vector<ParamSpec> BatchNorm::parameter_specs() const {
  if (!affine_) return {};
  return {{"weight", Shape{channels_}, ParamInit::kOnes},
          {"bias", Shape{channels_}, ParamInit::kZeros}};
}

std::vector<ParamSpec> BatchNorm::buffer_specs() const {
  return {{"running_mean", Shape{channels_}, ParamInit::kZeros},
          {"running_var", Shape{channels_}, ParamInit::kOnes}};
}

double BatchNorm::ForwardFlopsPerSample() const {
  // Statistics (sum, squared deviations) and the normalization, a few operations per element.
  return 6.0 * static_cast<double>(input_shape().num_elements());
}

std::vector<SavedSpec> BatchNorm::SavedPerSample() const {
  return {{SavedRef::kInput},
          {SavedRef::kNew, 0, kBatchNormStatsPerChannel * channels_ * SizeOf(DType::kF32)}};
}

absl::StatusOr<Tensor> BatchNorm::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                          const Tensor& x, SavedTensors& saved) const {
  if (!x.defined() || x.dtype() != DType::kF32 || x.shape().rank() < 1 ||
      x.shape().WithoutBatch() != input_shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat(type_, " layer '", name(), "' expects f32 samples of shape ",
                     input_shape().ToString(), ", got ", x.DebugString()));
  }
  if (ctx.buffers.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        type_, " layer '", name(), "' needs its running_mean and running_var buffers, got ",
        ctx.buffers.size(), " buffers"));
  }
  for (const Tensor& buffer : ctx.buffers) {
    // Named here by layer; the ops check them again by shape.
    if (!buffer.defined() || buffer.dtype() != DType::kF32 || buffer.num_elements() != channels_) {
      return absl::InvalidArgumentError(absl::StrCat(
          type_, " layer '", name(), "' needs running_mean and running_var buffers of f32[",
          channels_, "], got ", buffer.DebugString()));
    }
  }
  const int64_t batch = x.shape().dim(0);
  const BatchNormArgs args = Args(params, batch);
  ASSIGN_OR_RETURN(Tensor y,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  const NormOps& norm = ctx.device.ops().norm;
  if (!ctx.training) {
    RETURN_IF_ERROR(norm.BatchNormEvalForward(args, x, ctx.buffers[0], ctx.buffers[1], y));
    return y;
  }
  if (batch * positions_ < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        type_, " layer '", name(), "' got one value per channel (batch ", batch,
        "); training batch statistics need at least two: use micro-batches of 2 or more samples"));
  }
  ASSIGN_OR_RETURN(Tensor stats,
                   Tensor::Empty(ctx.device, Shape{channels_, kBatchNormStatsPerChannel},
                                 DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(norm.BatchNormTrainForward(args, x, ctx.buffers[0], ctx.buffers[1],
                                             ctx.update_buffers, y, stats));
  saved.tensors.push_back(x);
  saved.tensors.push_back(std::move(stats));
  return y;
}

BatchNormArgs BatchNorm::Args(std::span<const Tensor> params, int64_t batch) const {
  return BatchNormArgs{.batch = batch,
                       .channels = channels_,
                       .positions = positions_,
                       .eps = eps_,
                       .momentum = momentum_,
                       .weight = affine_ && !params.empty() ? params[0] : Tensor(),
                       .bias = affine_ && !params.empty() ? params[1] : Tensor()};
}

absl::Status BatchNorm::CheckOutputGrad(const SavedTensors& saved, const Tensor& dy) const {
  GPIPE_CHECK(saved.tensors.size() == 2) << name() << ": Backward without a training Forward";
  const Tensor& x = saved.tensors[0];
  if (!dy.defined() || dy.dtype() != DType::kF32 || dy.shape() != x.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat(type_, " layer '", name(), "': output gradient ", dy.DebugString(),
                     " does not match the forward's output f32", x.shape().ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> BatchNorm::RunBackward(const LayerContext& ctx,
                                              std::span<const Tensor> params,
                                              std::span<Tensor> grads, const SavedTensors& saved,
                                              const Tensor& dy, bool input, bool weight) const {
  const Tensor& x = saved.tensors[0];
  Tensor dx;
  if (input && ctx.need_input_grad) {
    ASSIGN_OR_RETURN(dx,
                     Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  }
  Tensor no_dweight, no_dbias;
  const bool params_grad = weight && affine_;
  if (!dx.defined() && !params_grad) return dx;
  // dx needs the weight even when only it is computed: pass the parameters whenever affine.
  RETURN_IF_ERROR(ctx.device.ops().norm.BatchNormBackward(
      Args(params, x.shape().dim(0)), x, saved.tensors[1], dy, dx,
      params_grad ? grads[0] : no_dweight, params_grad ? grads[1] : no_dbias));
  return dx;
}

absl::StatusOr<Tensor> BatchNorm::Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                           std::span<Tensor> grads, const SavedTensors& saved,
                                           const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  return RunBackward(ctx, params, grads, saved, dy, /*input=*/true, /*weight=*/true);
}

absl::StatusOr<Tensor> BatchNorm::BackwardInput(const LayerContext& ctx,
                                                std::span<const Tensor> params,
                                                const SavedTensors& saved, const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  return RunBackward(ctx, params, {}, saved, dy, /*input=*/true, /*weight=*/false);
}

absl::Status BatchNorm::BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                                       const SavedTensors& saved, const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  // The parameter gradients do not read the parameters (BackwardWeight is not given them).
  return RunBackward(ctx, {}, grads, saved, dy, /*input=*/false, /*weight=*/true).status();
}

}  // namespace gpipe
