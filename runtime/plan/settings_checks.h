// Semantic checks of the plan's non-model sections: pipeline (stages, micro-batches, explicit
// boundaries), training (batch, steps, optimizer), data, runtime and checkpoint. Each check reports
// every problem it finds into PlanErrors and never stops early. Internal to the plan module; one
// source file per section (pipeline_checks.cc, training_checks.cc, data_checks.cc,
// runtime_checks.cc with the checkpoint's).
#ifndef GPIPE_RUNTIME_PLAN_SETTINGS_CHECKS_H_
#define GPIPE_RUNTIME_PLAN_SETTINGS_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/plan.pb.h"
#include "runtime/plan/plan_errors.h"

namespace gpipe {

void CheckPipeline(const pb::Plan& plan, PlanErrors& errors);
void CheckTraining(const pb::Plan& plan, PlanErrors& errors);
// `directory`: where relative data paths resolve (the plan file's directory). Also checks that
// model.input's type and shape fit the data source (token ids come only from data.text and data.tokens).
void CheckData(const pb::Plan& plan, const std::string& directory, PlanErrors& errors);
// data.tokens' ids against the model's vocabulary (num_classes, and the first layer's table when
// it is an embedding): reads the whole file once, in pieces, so it runs after every other check
// has passed.
void CheckTokenIds(const pb::Plan& plan, int64_t num_classes, const std::string& directory,
                   PlanErrors& errors);
void CheckRuntime(const pb::Plan& plan, PlanErrors& errors);
void CheckCheckpoint(const pb::Plan& plan, PlanErrors& errors);

// Up to `count` divisors of `n` (>= 1) closest to `wanted`, ascending; ties prefer the smaller.
// Divisor pairs (d, n/d) are searched for d up to min(sqrt(n), 10^6).
std::vector<int64_t> DivisorsNear(int64_t n, int64_t wanted, int count);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_SETTINGS_CHECKS_H_
