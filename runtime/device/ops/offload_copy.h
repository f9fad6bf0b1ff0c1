// What every device's offload copies (Device::StartCopyToHost, StartCopyFromHost) share: the
// check of their two tensors, and the AsyncCopy of a device whose copies finish before the call
// returns (the CPU's).
#ifndef GPIPE_RUNTIME_DEVICE_OPS_OFFLOAD_COPY_H_
#define GPIPE_RUNTIME_DEVICE_OPS_OFFLOAD_COPY_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/allocator.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"

namespace gpipe {

// OK when `on_device` is `device`'s memory, `on_host` is `host`'s (the device's offload_host())
// and both hold the same bytes; INVALID_ARGUMENT naming the device and both tensors otherwise.
absl::Status CheckOffloadCopy(absl::string_view device_name, const Allocator& device,
                              const Allocator& host, const Tensor& on_device,
                              const Tensor& on_host);

// A copy that was done when it was made.
class CompletedCopy final : public AsyncCopy {
 public:
  absl::StatusOr<bool> Finished() override { return true; }
  absl::Status OrderComputeAfter() override { return absl::OkStatus(); }
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_OFFLOAD_COPY_H_
