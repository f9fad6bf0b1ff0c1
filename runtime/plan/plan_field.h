// One field of a plan by its dotted name ("checkpoint.dir"), as text: what a script needs to know
// of a plan after its overrides (gpipe-plan field), without parsing plan text itself.
#ifndef GPIPE_RUNTIME_PLAN_PLAN_FIELD_H_
#define GPIPE_RUNTIME_PLAN_PLAN_FIELD_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/plan.pb.h"

namespace gpipe {

// The value of the singular scalar field `dotted_name` of `plan`: a string as it is, an enum by
// its name, a number or bool as text; an unset field gives its default ("" for a string without
// one), also inside an unset message. INVALID_ARGUMENT naming the part of the name that is not a
// field, is a repeated field, or is a message where a value is needed.
absl::StatusOr<std::string> PlanFieldValue(const pb::Plan& plan, absl::string_view dotted_name);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_PLAN_FIELD_H_
