// The standalone devices of a build without a CUDA compiler: none beyond CPU.
#include "absl/strings/str_cat.h"
#include "runtime/backend/standalone_device.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Device>> CreateOptionalStandaloneDevice(const pb::Runtime& runtime) {
  return absl::UnimplementedError(absl::StrCat(
      "device ", pb::Device_Name(runtime.device()),
      " is not built into this program: this gpipe was built without the CUDA backend (no nvcc "
      "at build time)"));
}

}  // namespace gpipe
