#include "runtime/device/ops/norm_ops.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops/norm_checks.h"

namespace gpipe {

using op_checks::NormF32Elements;

absl::Status NormOps::LayerNormForward(const LayerNormArgs& args, const Tensor& x, Tensor& y,
                                       Tensor& stats) const {
  constexpr const char* kOp = "LayerNormForward";
  RETURN_IF_ERROR(op_checks::LayerNorm(kOp, args, x, stats, y, "y"));
  RETURN_IF_ERROR(NormF32Elements(kOp, "y", y, args.rows * args.features));
  return DoLayerNormForward(args, x, y, stats);
}

absl::Status NormOps::LayerNormBackwardInput(const LayerNormArgs& args, const Tensor& x,
                                             const Tensor& stats, const Tensor& dy,
                                             Tensor& dx) const {
  constexpr const char* kOp = "LayerNormBackwardInput";
  RETURN_IF_ERROR(op_checks::LayerNorm(kOp, args, x, stats, dy, "dy"));
  RETURN_IF_ERROR(NormF32Elements(kOp, "dy", dy, args.rows * args.features));
  if (dx.defined()) RETURN_IF_ERROR(NormF32Elements(kOp, "dx", dx, args.rows * args.features));
  return DoLayerNormBackwardInput(args, x, stats, dy, dx);
}

absl::Status NormOps::LayerNormBackwardParams(const LayerNormArgs& args, const Tensor& x,
                                              const Tensor& stats, const Tensor& dy,
                                              Tensor& dweight, Tensor& dbias) const {
  constexpr const char* kOp = "LayerNormBackwardParams";
  RETURN_IF_ERROR(op_checks::LayerNorm(kOp, args, x, stats, dy, "dy"));
  RETURN_IF_ERROR(NormF32Elements(kOp, "dy", dy, args.rows * args.features));
  if (dweight.defined()) RETURN_IF_ERROR(NormF32Elements(kOp, "dweight", dweight, args.features));
  if (dbias.defined()) RETURN_IF_ERROR(NormF32Elements(kOp, "dbias", dbias, args.features));
  return DoLayerNormBackwardParams(args, x, stats, dy, dweight, dbias);
}

absl::Status NormOps::RmsNormForward(const RmsNormArgs& args, const Tensor& x, Tensor& y,
                                     Tensor& stats) const {
  constexpr const char* kOp = "RmsNormForward";
  RETURN_IF_ERROR(op_checks::RmsNorm(kOp, args, x, stats, y, "y", /*weight_needed=*/true));
  RETURN_IF_ERROR(NormF32Elements(kOp, "y", y, args.rows * args.features));
  return DoRmsNormForward(args, x, y, stats);
}

absl::Status NormOps::RmsNormBackwardInput(const RmsNormArgs& args, const Tensor& x,
                                           const Tensor& stats, const Tensor& dy,
                                           Tensor& dx) const {
  constexpr const char* kOp = "RmsNormBackwardInput";
  RETURN_IF_ERROR(op_checks::RmsNorm(kOp, args, x, stats, dy, "dy", /*weight_needed=*/true));
  RETURN_IF_ERROR(NormF32Elements(kOp, "dy", dy, args.rows * args.features));
  RETURN_IF_ERROR(NormF32Elements(kOp, "dx", dx, args.rows * args.features));
  return DoRmsNormBackwardInput(args, x, stats, dy, dx);
}

absl::Status NormOps::RmsNormBackwardParams(const RmsNormArgs& args, const Tensor& x,
                                            const Tensor& stats, const Tensor& dy,
                                            Tensor& dweight) const {
  constexpr const char* kOp = "RmsNormBackwardParams";
  RETURN_IF_ERROR(op_checks::RmsNorm(kOp, args, x, stats, dy, "dy", /*weight_needed=*/false));
  RETURN_IF_ERROR(NormF32Elements(kOp, "dy", dy, args.rows * args.features));
  RETURN_IF_ERROR(NormF32Elements(kOp, "dweight", dweight, args.features));
  return DoRmsNormBackwardParams(args, x, stats, dy, dweight);
}

absl::Status NormOps::BatchNormTrainForward(const BatchNormArgs& args, const Tensor& x,
                                            Tensor& running_mean, Tensor& running_var,
                                            bool update_running, Tensor& y, Tensor& stats) const {
  constexpr const char* kOp = "BatchNormTrainForward";
  RETURN_IF_ERROR(op_checks::BatchNorm(kOp, args, x, y, "y"));
  RETURN_IF_ERROR(NormF32Elements(kOp, "running_mean", running_mean, args.channels));
  RETURN_IF_ERROR(NormF32Elements(kOp, "running_var", running_var, args.channels));
  RETURN_IF_ERROR(NormF32Elements(kOp, "stats", stats, args.channels * kBatchNormStatsPerChannel));
  if (args.batch * args.positions < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": one value per channel (batch ", args.batch, ", positions ",
                     args.positions, ") has no variance; training statistics need at least two"));
  }
  return DoBatchNormTrainForward(args, x, running_mean, running_var, update_running, y, stats);
}

absl::Status NormOps::BatchNormEvalForward(const BatchNormArgs& args, const Tensor& x,
                                           const Tensor& running_mean, const Tensor& running_var,
                                           Tensor& y) const {
  constexpr const char* kOp = "BatchNormEvalForward";
  RETURN_IF_ERROR(op_checks::BatchNorm(kOp, args, x, y, "y"));
  RETURN_IF_ERROR(NormF32Elements(kOp, "running_mean", running_mean, args.channels));
  RETURN_IF_ERROR(NormF32Elements(kOp, "running_var", running_var, args.channels));
  return DoBatchNormEvalForward(args, x, running_mean, running_var, y);
}

absl::Status NormOps::BatchNormBackward(const BatchNormArgs& args, const Tensor& x,
                                        const Tensor& stats, const Tensor& dy, Tensor& dx,
                                        Tensor& dweight, Tensor& dbias) const {
  constexpr const char* kOp = "BatchNormBackward";
  RETURN_IF_ERROR(op_checks::BatchNorm(kOp, args, x, dy, "dy"));
  RETURN_IF_ERROR(NormF32Elements(kOp, "stats", stats, args.channels * kBatchNormStatsPerChannel));
  const int64_t elements = args.batch * args.channels * args.positions;
  if (dx.defined()) RETURN_IF_ERROR(NormF32Elements(kOp, "dx", dx, elements));
  if (dweight.defined()) RETURN_IF_ERROR(NormF32Elements(kOp, "dweight", dweight, args.channels));
  if (dbias.defined()) RETURN_IF_ERROR(NormF32Elements(kOp, "dbias", dbias, args.channels));
  return DoBatchNormBackward(args, x, stats, dy, dx, dweight, dbias);
}

}  // namespace gpipe
