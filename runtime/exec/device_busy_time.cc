#include "runtime/exec/device_busy_time.h"

#include "runtime/core/status_macros.h"

namespace gpipe {

absl::Status DeviceBusyTime::Begin() {
  ASSIGN_OR_RETURN(open_, device_.RecordEvent());
  return absl::OkStatus();
}

absl::Status DeviceBusyTime::End() {
  if (open_ == nullptr) {
    return absl::FailedPreconditionError("a compute span ended that never began");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceEvent> end, device_.RecordEvent());
  spans_.emplace_back(std::move(open_), std::move(end));
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> DeviceBusyTime::Total() {
  double seconds = 0;
  for (const auto& [begin, end] : spans_) {
    ASSIGN_OR_RETURN(const double span, device_.ElapsedSeconds(*begin, *end));
    seconds += span;
  }
  return absl::Seconds(seconds);
}

}  // namespace gpipe
