// Argument checks of NormOps, shared by every backend so each says the same thing.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_NORM_CHECKS_H_
#define GPIPE_RUNTIME_DEVICE_OPS_NORM_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/core/tensor.h"
#include "runtime/device/ops/norm_ops.h"

namespace gpipe::op_checks {

// `tensor` (called `name`) is a defined f32 tensor of exactly `elements` elements.
absl::Status NormF32Elements(const char* op, const char* name, const Tensor& tensor,
                             int64_t elements);
// rows >= 0, features >= 1, eps > 0; x [.., features] with rows * features elements; stats
// [rows, kLayerNormStatsPerRow]; `other` (when defined) like x; weight and bias both or neither,
// [features] each.
absl::Status LayerNorm(const char* op, const LayerNormArgs& args, const Tensor& x,
                       const Tensor& stats, const Tensor& other, const char* other_name);
// rows >= 0, features >= 1, eps > 0; x [.., features] with rows * features elements; stats
// [rows, kRmsNormStatsPerRow]; `other` (when defined) like x; weight [features] unless
// `weight_needed` is false.
absl::Status RmsNorm(const char* op, const RmsNormArgs& args, const Tensor& x, const Tensor& stats,
                     const Tensor& other, const char* other_name, bool weight_needed);
// batch >= 0, channels >= 1, positions >= 1, eps > 0; x and `other` with batch * channels *
// positions elements; weight and bias both or neither, [channels] each.
absl::Status BatchNorm(const char* op, const BatchNormArgs& args, const Tensor& x,
                       const Tensor& other, const char* other_name);

}  // namespace gpipe::op_checks

#endif  // GPIPE_RUNTIME_DEVICE_OPS_NORM_CHECKS_H_
