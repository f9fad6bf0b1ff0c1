// CompileCustomProgram: turns a CUSTOM schedule's action table (action_list.h) into a verified
// Program. Row r is rank r, so the row count is the stage count K; the stage ids define the
// placement: V = largest id + 1 virtual stages, each on the one rank whose row names it. V must be
// a multiple of K and the placement LOOPED (virtual stage v on rank v % K as its chunk v / K) or
// V_SHAPE (the chunks zigzag, so rank r holds r and 2K-1-r: topology.h); anything else is refused
// naming where each stage sits.
// Each action becomes the builders' block (instruction_blocks.h: transfers derived, a receive
// right before its consumer, a send right after its producer), then the step's end; receives are
// moved earlier where NCCL's per-pair matching needs it (receive_order.h), and the whole program
// passes VerifyProgram. Every error names the row and the action:
// "path.csv:2: action 14 (3B5): ...". Pure; thread-compatible.
#ifndef GPIPE_RUNTIME_SCHEDULE_CUSTOM_PROGRAM_H_
#define GPIPE_RUNTIME_SCHEDULE_CUSTOM_PROGRAM_H_

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/schedule/action_list.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

// A program of kind CUSTOM with stages = table.size(), chunks = V / K and the placement found.
// INVALID_ARGUMENT when a rule fails: a stage on two ranks or on none, a placement other than
// LOOPED and V_SHAPE, a micro-batch id
// outside 0 ... micro_batches - 1, a forward or backward (B, or I then W) missing, repeated or out
// of order, or the verifier's proof (matching under MPI and NCCL, no deadlock).
absl::StatusOr<Program> CompileCustomProgram(const ActionTable& table, int micro_batches);

// The action table of pipeline.custom, row r named "pipeline.custom.ranks[r]".
absl::StatusOr<ActionTable> ActionTableFromProto(const pb::CustomSchedule& custom);

// The inverse for an already parsed table: one RankActions per row, its actions separated by
// spaces ("0F0 0F1 0B0"; OVERLAP_F_B pairs become their two actions).
pb::CustomSchedule ActionTableToProto(const ActionTable& table);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_CUSTOM_PROGRAM_H_
