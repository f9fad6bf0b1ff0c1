#include "runtime/backend/backend_registry.h"

#include "absl/strings/str_cat.h"

namespace gpipe {

void BackendRegistry::Register(pb::Device device, Factory factory) {
  factories_[static_cast<int>(device)] = std::move(factory);
}

absl::StatusOr<std::unique_ptr<Backend>> BackendRegistry::Create(const pb::Runtime& runtime) const {
  auto it = factories_.find(static_cast<int>(runtime.device()));
  if (it == factories_.end()) {
    return absl::UnimplementedError(absl::StrCat(
        "runtime.device ", pb::Device_Name(runtime.device()), " is not built into this program"));
  }
  return it->second(runtime);
}

}  // namespace gpipe
