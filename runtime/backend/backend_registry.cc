#include "runtime/backend/backend_registry.h"

#include "absl/strings/str_cat.h"

namespace gpipe {

void BackendRegistry::Register(pb::Device device, Factory factory) {
  factories_[static_cast<int>(device)] = std::move(factory);
}

void BackendRegistry::MarkUnavailable(pb::Device device, std::string reason) {
  unavailable_[static_cast<int>(device)] = std::move(reason);
}

absl::StatusOr<std::unique_ptr<Backend>> BackendRegistry::Create(
    const pb::Runtime& runtime, const BackendContext& context) const {
  auto it = factories_.find(static_cast<int>(runtime.device()));
  if (it == factories_.end()) {
    auto why = unavailable_.find(static_cast<int>(runtime.device()));
    return absl::UnimplementedError(absl::StrCat(
        "runtime.device ", pb::Device_Name(runtime.device()), " is not built into this program",
        why != unavailable_.end() ? absl::StrCat(": ", why->second) : ""));
  }
  return it->second(runtime, context);
}

}  // namespace gpipe
