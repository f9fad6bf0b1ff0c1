// Merging one command-line override into a plan. Singular fields merge (MergeFrom); a repeated
// field the override mentions (even as an empty list `[]`) replaces the plan's list, at any
// depth. Locations follow the values: what the override set now points into the override.
// Internal to the plan module.
#ifndef GPIPE_RUNTIME_PLAN_OVERRIDE_MERGE_H_
#define GPIPE_RUNTIME_PLAN_OVERRIDE_MERGE_H_

#include "proto/plan.pb.h"
#include "runtime/plan/text_parse.h"

namespace gpipe {

// `override_plan` and `override_locations` come from ParsePlanWithLocations on the override.
void MergeOverride(const pb::Plan& override_plan, const LocationMap& override_locations,
                   pb::Plan* plan, LocationMap* locations);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_OVERRIDE_MERGE_H_
