// DeviceBusyTime: how long a stage's device computed during one step, measured by the device
// itself: each compute span is bracketed by device events (CUDA events on a GPU, the monotonic
// clock on the CPU, the modelled time on the simulated device), and the spans are summed once,
// at the report, so measuring never synchronizes the host with the device mid-step.
// Single-threaded; lives for one step.
#ifndef GPIPE_RUNTIME_EXEC_DEVICE_BUSY_TIME_H_
#define GPIPE_RUNTIME_EXEC_DEVICE_BUSY_TIME_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/device/device.h"

namespace gpipe {

class DeviceBusyTime {
 public:
  explicit DeviceBusyTime(Device& device) : device_(device) {}

  // Starts a compute span (replacing one begun and never ended, e.g. by a failed op).
  absl::Status Begin();
  // Ends the span begun last; FAILED_PRECONDITION without one.
  absl::Status End();
  // The sum of every ended span, in device time.
  absl::StatusOr<absl::Duration> Total();

 private:
  Device& device_;
  std::unique_ptr<DeviceEvent> open_;
  std::vector<std::pair<std::unique_ptr<DeviceEvent>, std::unique_ptr<DeviceEvent>>> spans_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_DEVICE_BUSY_TIME_H_
