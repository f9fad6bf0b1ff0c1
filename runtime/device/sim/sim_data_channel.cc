#include "runtime/device/sim/sim_data_channel.h"

#include "absl/strings/str_cat.h"

namespace gpipe {

absl::Status SimDataChannel::AllReduceSum(std::span<Tensor> tensors,
                                          std::span<const int> group_ranks, absl::Time deadline) {
  int64_t bytes = 0;
  for (const Tensor& t : tensors) {
    if (!t.defined() || t.dtype() != DType::kF32) {
      return absl::InvalidArgumentError(
          absl::StrCat("sim: all-reduce of ", t.DebugString(), " (f32 tensors only)"));
    }
    bytes += t.bytes();
  }
  const absl::Duration time = costs_.AllReduce(bytes, static_cast<int>(group_ranks.size()));
  if (absl::Now() + time > deadline) {
    return absl::DeadlineExceededError(absl::StrCat(
        "sim: a ", absl::FormatDuration(time), " all-reduce of ", bytes, " bytes over ",
        group_ranks.size(), " ranks cannot finish before the deadline"));
  }
  return device_.Occupy(time);
}

}  // namespace gpipe
