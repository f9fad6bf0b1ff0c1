// A Program is the whole pipeline's schedule for one step (a training step, or a forward-only
// EVAL pass): one instruction list per stage (index = stage). BuildProgram (build_program.h)
// makes one from a schedule kind; VerifyProgram (verifier.h) checks any Program before it runs.
// ToProto/FromProto carry one stage's list from rank 0 to the rank that runs it.
#ifndef GPIPE_RUNTIME_SCHEDULE_PROGRAM_H_
#define GPIPE_RUNTIME_SCHEDULE_PROGRAM_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/control.pb.h"
#include "proto/plan.pb.h"
#include "runtime/schedule/instruction.h"
#include "runtime/schedule/schedule_shape.h"
#include "runtime/schedule/topology.h"

namespace gpipe::schedule {

// A skip connection (plan: skip_add, skip_concat) whose two ends sit on different virtual
// stages: the join layer `layer` (index in model.layers) on virtual stage `to` reads the output
// of layer `producer` on virtual stage `from` < `to`. Its transfers are SendSkip/RecvSkip forward
// and SendSkipGrad/RecvSkipGrad back (instruction.h).
struct SkipRoute {
  int layer = 0;
  int producer = 0;
  int from = 0;
  int to = 0;
  bool operator==(const SkipRoute&) const = default;
};

struct Program {
  pb::Schedule kind = pb::GPIPE;
  int stages = 0;
  int micro_batches = 0;
  // Virtual chunks per stage (pipeline.virtual_stages) and where they run (pipeline.placement:
  // V_SHAPE for ZERO_BUBBLE_V, DUALPIPE_V and a zigzag CUSTOM schedule). See topology.h.
  int chunks = 1;
  pb::Placement placement = pb::LOOPED;
  std::vector<StageProgram> stage_programs;  // index = stage
  // The skip connections that cross virtual stages, by join layer (ascending); empty for a model
  // without any.
  std::vector<SkipRoute> skips;

  Topology topology() const { return {stages, chunks, placement}; }
  // EVAL: no backward side at all, and every stage ends with ReportEval.
  bool forward_only() const { return IsForwardOnly(kind); }
  // The route of join layer `layer`, or null when no skip route reads into it.
  const SkipRoute* FindSkip(int layer) const;
};

// "stage 1, instruction #7 Backward(mb=0)": how every message names an instruction.
std::string DescribeInstruction(const Program& program, int stage, int index);

pb::StageProgramProto ToProto(const StageProgram& program);

// INVALID_ARGUMENT naming the instruction index for an unknown or missing kind, a missing or
// negative micro-batch, a negative chunk, fields on step-level instructions, or a negative stage.
absl::StatusOr<StageProgram> FromProto(const pb::StageProgramProto& proto);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_PROGRAM_H_
