#include "runtime/data/gather_checks.h"

#include "absl/strings/str_cat.h"

namespace gpipe::dataset_internal {

absl::Status CheckGather(const std::string& dataset, const char* what,
                         std::span<const int64_t> indices, int64_t size, const Shape& per_sample,
                         DType dtype, const Tensor& out) {
  const Shape expected = per_sample.WithBatch(static_cast<int64_t>(indices.size()));
  if (!out.defined() || out.dtype() != dtype || out.shape() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gathering ", what, " from ", dataset, ": the output tensor is ", out.DebugString(),
        " but ", indices.size(), " samples need ", DTypeName(dtype), expected.ToString()));
  }
  if (!out.allocator().host_accessible()) {
    return absl::InvalidArgumentError(absl::StrCat("gathering ", what, " from ", dataset,
                                                   ": the output tensor must be in host memory"));
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] == kPaddingSample) continue;
    if (indices[i] < 0 || indices[i] >= size) {
      return absl::OutOfRangeError(absl::StrCat(
          "gathering ", what, " from ", dataset, ": sample index ", indices[i], " (position ", i,
          ") is outside [0, ", size, ") and is not the padding index ", kPaddingSample));
    }
  }
  return absl::OkStatus();
}

}  // namespace gpipe::dataset_internal
