#include "runtime/device/ops/norm_checks.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe::op_checks {

absl::Status NormF32Elements(const char* op, const char* name, const Tensor& tensor,
                             int64_t elements) {
  if (tensor.defined() && tensor.dtype() == DType::kF32 && tensor.num_elements() == elements) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", name, " must be f32 with ", elements,
                                                 " elements, got ", tensor.DebugString()));
}

namespace {

// What layer norm and RMS norm share: rows >= 0, features >= 1, eps > 0; x [.., features] with
// rows * features elements; stats with `stats_per_row` values a row; `other` (when defined) like
// x.
absl::Status RowNorm(const char* op, int64_t rows, int64_t features, double eps,
                     int64_t stats_per_row, const Tensor& x, const Tensor& stats,
                     const Tensor& other, const char* other_name) {
  if (rows < 0 || features < 1 || !(eps > 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": needs rows >= 0, features >= 1 and eps > 0, got rows ", rows,
                     ", features ", features, ", eps ", eps));
  }
  const int64_t elements = rows * features;
  RETURN_IF_ERROR(NormF32Elements(op, "x", x, elements));
  if (x.shape().rank() < 1 || x.shape().last() != features) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": x must end in ", features, " features, got ", x.DebugString()));
  }
  RETURN_IF_ERROR(NormF32Elements(op, "stats", stats, rows * stats_per_row));
  if (other.defined()) RETURN_IF_ERROR(NormF32Elements(op, other_name, other, elements));
  return absl::OkStatus();
}

}  // namespace

absl::Status LayerNorm(const char* op, const LayerNormArgs& args, const Tensor& x,
                       const Tensor& stats, const Tensor& other, const char* other_name) {
  RETURN_IF_ERROR(RowNorm(op, args.rows, args.features, args.eps, kLayerNormStatsPerRow, x, stats,
                          other, other_name));
  if (args.weight.defined() != args.bias.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": weight and bias must both be defined or both undefined, got ",
                     args.weight.DebugString(), " and ", args.bias.DebugString()));
  }
  if (args.weight.defined()) {
    RETURN_IF_ERROR(NormF32Elements(op, "weight", args.weight, args.features));
    RETURN_IF_ERROR(NormF32Elements(op, "bias", args.bias, args.features));
  }
  return absl::OkStatus();
}

absl::Status RmsNorm(const char* op, const RmsNormArgs& args, const Tensor& x, const Tensor& stats,
                     const Tensor& other, const char* other_name, bool weight_needed) {
  RETURN_IF_ERROR(RowNorm(op, args.rows, args.features, args.eps, kRmsNormStatsPerRow, x, stats,
                          other, other_name));
  if (weight_needed) RETURN_IF_ERROR(NormF32Elements(op, "weight", args.weight, args.features));
  return absl::OkStatus();
}

absl::Status BatchNorm(const char* op, const BatchNormArgs& args, const Tensor& x,
                       const Tensor& other, const char* other_name) {
  if (args.batch < 0 || args.channels < 1 || args.positions < 1 || !(args.eps > 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": needs batch >= 0, channels >= 1, positions >= 1 and eps > 0, got batch ", args.batch,
        ", channels ", args.channels, ", positions ", args.positions, ", eps ", args.eps));
  }
  const int64_t elements = args.batch * args.channels * args.positions;
  RETURN_IF_ERROR(NormF32Elements(op, "x", x, elements));
  RETURN_IF_ERROR(NormF32Elements(op, other_name, other, elements));
  if (args.weight.defined() != args.bias.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": weight and bias must both be defined or both undefined, got ",
                     args.weight.DebugString(), " and ", args.bias.DebugString()));
  }
  if (args.weight.defined()) {
    RETURN_IF_ERROR(NormF32Elements(op, "weight", args.weight, args.channels));
    RETURN_IF_ERROR(NormF32Elements(op, "bias", args.bias, args.channels));
  }
  return absl::OkStatus();
}

}  // namespace gpipe::op_checks
