#include "runtime/backend/standalone_device.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "runtime/device/cpu/cpu_device.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Device>> CreateStandaloneDevice(const pb::Runtime& runtime) {
  switch (runtime.device()) {
    case pb::CPU:
      return std::unique_ptr<Device>(std::make_unique<CpuDevice>(CpuDeviceOptions{
          .threads = runtime.threads(), .memory_limit_bytes = runtime.memory_limit_bytes()}));
    case pb::SIM:
      return absl::InvalidArgumentError(
          "device SIM has no kernels to time: profile on CPU or CUDA (--device)");
    default:
      return CreateOptionalStandaloneDevice(runtime);
  }
}

absl::StatusOr<pb::Device> StandaloneDeviceFromName(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "cpu") return pb::CPU;
  if (lower == "cuda") return pb::CUDA;
  return absl::InvalidArgumentError(absl::StrCat("--device takes cpu or cuda, got '", name, "'"));
}

}  // namespace gpipe
