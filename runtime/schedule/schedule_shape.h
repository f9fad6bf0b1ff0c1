// Which (schedule, stages, micro-batches, virtual stages) combinations have a program.
// CheckScheduleShape is the one place the rules live: BuildProgram calls it first, and plan
// validation calls it to report a plan whose numbers do not fit its schedule (gpipe-plan show
// --compare reaches it through both and lists the kinds it rejects).
// Its INVALID_ARGUMENT messages name the plan fields to change (pipeline.stages,
// pipeline.micro_batches, pipeline.virtual_stages, pipeline.schedule) and values that work.
#ifndef GPIPE_RUNTIME_SCHEDULE_SCHEDULE_SHAPE_H_
#define GPIPE_RUNTIME_SCHEDULE_SCHEDULE_SHAPE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/plan.pb.h"

namespace gpipe::schedule {

// Largest stages * virtual_stages * micro_batches BuildProgram accepts (keeps programs a few
// tens of MB at most).
inline constexpr long long kMaxStageMicroBatches = 1 << 20;

// Every kind BuildProgram has a builder for, in proto order.
std::vector<pb::Schedule> AllSchedules();

// "GPIPE, ONE_F_ONE_B, ...": AllSchedules() as a user reads them in a message.
std::string ScheduleNames();

// Forward-only kinds (EVAL): no backward, no update; programs end with ReportEval.
bool IsForwardOnly(pb::Schedule kind);

// What a schedule becomes where its shape is too small for its own order, for `gpipe-plan show`
// and the grid: DUALPIPE_V with micro_batches < 2 * stages runs ZERO_BUBBLE_V's order. "" for
// every shape that runs its kind's own order.
std::string DegenerateNote(pb::Schedule kind, int stages, int micro_batches);

// OK when BuildProgram(kind, stages, micro_batches, virtual_stages) builds a program. Rules:
// stages, micro_batches, virtual_stages >= 1; virtual_stages == 1 except for INTERLEAVED_1F1B,
// which needs stages >= 2 and virtual_stages >= 2, ZERO_BUBBLE_V and
// DUALPIPE_V, which need 2, and CUSTOM and EVAL, which take any;
// stages * virtual_stages * micro_batches <= kMaxStageMicroBatches; kind has a builder.
absl::Status CheckScheduleShape(pb::Schedule kind, int stages, int micro_batches,
                                int virtual_stages = 1);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_SCHEDULE_SHAPE_H_
