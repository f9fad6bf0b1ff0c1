#include "runtime/device/ops/offload_copy.h"

#include "absl/strings/str_cat.h"

namespace gpipe {

absl::Status CheckOffloadCopy(absl::string_view device_name, const Allocator& device,
                              const Allocator& host, const Tensor& on_device,
                              const Tensor& on_host) {
  const auto describe = [](const Tensor& t) {
    return t.defined() ? t.DebugString() : std::string("an undefined tensor");
  };
  if (!on_device.defined() || &on_device.allocator() != &device || !on_host.defined() ||
      &on_host.allocator() != &host || on_device.bytes() != on_host.bytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat(device_name,
                     ": an offload copy takes a tensor in device memory and one of the same bytes "
                     "in its offload host memory; got ",
                     describe(on_device), " and ", describe(on_host)));
  }
  return absl::OkStatus();
}

}  // namespace gpipe
