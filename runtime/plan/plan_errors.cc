#include "runtime/plan/plan_errors.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpipe {

void PlanErrors::Add(const std::string& field_path, const std::string& message) {
  errors_.push_back(absl::StrCat(loaded_.LocationOf(field_path), ": ", field_path, ": ", message));
}

absl::Status PlanErrors::ToStatus() const {
  if (errors_.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors_, "\n"));
}

}  // namespace gpipe
