#include "runtime/backend/sim/sim_dataset.h"

#include "absl/strings/str_cat.h"

namespace gpipe {

absl::Status ShapeOnlyDataset::Check(const char* what, std::span<const int64_t> indices,
                                     const Shape& per_sample, DType dtype,
                                     const Tensor& out) const {
  const Shape expected = per_sample.WithBatch(static_cast<int64_t>(indices.size()));
  if (!out.defined() || out.dtype() != dtype || out.shape() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("sim: gathering ", what, " into ",
                                                   out.DebugString(), ", expected ",
                                                   DTypeName(dtype), expected.ToString()));
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] != kPaddingSample && (indices[i] < 0 || indices[i] >= size())) {
      return absl::OutOfRangeError(absl::StrCat("sim: sample index ", indices[i], " (position ", i,
                                                ") is outside [0, ", size(), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ShapeOnlyDataset::GatherInputs(std::span<const int64_t> indices, Tensor& out) const {
  return Check("inputs", indices, input_shape(), input_dtype(), out);
}

absl::Status ShapeOnlyDataset::GatherTargets(std::span<const int64_t> indices, Tensor& out) const {
  return Check("targets", indices, target_shape(), target_dtype(), out);
}

}  // namespace gpipe
