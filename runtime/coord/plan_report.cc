#include "runtime/coord/plan_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/coord/setup_builder.h"
#include "runtime/coord/step_summary.h"
#include "runtime/core/status_macros.h"
#include "runtime/schedule/grid.h"
#include "runtime/schedule/program.h"
#include "runtime/schedule/verifier.h"

namespace gpipe {
namespace {

// Optimizer state elements per parameter element.
int OptimizerStateFactor(const pb::Optimizer& optimizer) {
  if (optimizer.has_sgd()) return optimizer.sgd().momentum() != 0 ? 1 : 0;
  return 2;  // Adam, AdamW: two moments
}

}  // namespace

std::vector<StageMemoryEstimate> EstimateStageMemory(const AnalyzedPlan& plan) {
  const int64_t micro_batches = plan.plan.pipeline().micro_batches();
  const int64_t b = plan.plan.training().global_batch() / micro_batches;
  const pb::Remat remat = plan.plan.pipeline().remat();
  const int state = OptimizerStateFactor(plan.plan.training().optimizer());
  std::vector<StageMemoryEstimate> out;
  for (const StageInfo& stage : plan.stages) {
    StageMemoryEstimate e;
    e.parameters = stage.parameters * 4 * (2 + state);
    const int64_t a = stage.input_shape.num_elements() * b * 4;
    // Layers save (at most) their input; the first layer's input is the boundary itself.
    int64_t internal = 0;
    for (int l = stage.first_layer + 1; l < stage.end_layer; ++l) {
      internal += plan.layers[l].input_shape.num_elements() * b * 4;
    }
    e.boundary = micro_batches * a;
    e.activations = remat == pb::NEVER ? micro_batches * internal : internal;
    out.push_back(e);
  }
  return out;
}

absl::StatusOr<std::string> FormatPlanReport(const AnalyzedPlan& plan, bool with_schedule) {
  const pb::Pipeline& pipeline = plan.plan.pipeline();
  std::string out =
      absl::StrCat("plan '", plan.plan.name(), "' is valid: ", plan.layers.size(), " layers, ",
                   pipeline.stages(), " stages, ", pipeline.micro_batches(), " micro-batches of ",
                   plan.plan.training().global_batch() / pipeline.micro_batches(), " samples\n\n");
  absl::StrAppend(&out, FormatStageTable(plan));
  if (!with_schedule) return out;

  ASSIGN_OR_RETURN(
      schedule::Program program,
      schedule::BuildProgram(pipeline.schedule(), pipeline.stages(), pipeline.micro_batches()));
  ASSIGN_OR_RETURN(schedule::VerifyResult prediction,
                   schedule::VerifyProgram(program, CostsFromFlops(plan)));
  absl::StrAppend(&out, "\nschedule ", pb::Schedule_Name(pipeline.schedule()),
                  " (time in units of a mean stage's forward; backward = 2x forward)\n",
                  schedule::DrawGrid(program, prediction));
  absl::StrAppendFormat(
      &out, "\npredicted bubble %.1f%% (GPipe formula (K-1)/(M+K-1) = %.1f%%)\n",
      100.0 * prediction.bubble_fraction,
      100.0 * (pipeline.stages() - 1) / (pipeline.micro_batches() + pipeline.stages() - 1));
  absl::StrAppend(&out, "\npredicted peak memory per stage (fp32, remat ",
                  pb::Remat_Name(pipeline.remat()), ")\n");
  absl::StrAppendFormat(&out, "%-7s %14s %14s %14s %14s\n", "stage", "parameters", "boundary",
                        "activations", "total");
  const std::vector<StageMemoryEstimate> memory = EstimateStageMemory(plan);
  for (size_t s = 0; s < memory.size(); ++s) {
    absl::StrAppendFormat(&out, "%-7d %14s %14s %14s %14s\n", s, FormatBytes(memory[s].parameters),
                          FormatBytes(memory[s].boundary), FormatBytes(memory[s].activations),
                          FormatBytes(memory[s].total()));
  }
  return out;
}

}  // namespace gpipe
