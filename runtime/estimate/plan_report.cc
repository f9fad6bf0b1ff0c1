#include "runtime/estimate/plan_report.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/byte_format.h"
#include "runtime/core/status_macros.h"
#include "runtime/estimate/schedule_prediction.h"
#include "runtime/estimate/sim_costs.h"
#include "runtime/exec/gradient_buckets.h"
#include "runtime/plan/boundary_dtype.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_program.h"
#include "runtime/schedule/grid.h"

namespace gpipe {
namespace {

std::string ScheduleName(const pb::Pipeline& pipeline) {
  std::string name = pb::Schedule_Name(pipeline.schedule());
  if (pipeline.virtual_stages() > 1) absl::StrAppend(&name, " v=", pipeline.virtual_stages());
  return name;
}

std::string Percent(double fraction) { return absl::StrFormat("%.1f%%", 100.0 * fraction); }

// On the simulated device the schedule is timed in milliseconds from runtime.sim's cost table
// (the step time a SIM run should take); otherwise in relative FLOP units.
bool TimedInMs(const pb::Plan& plan) { return plan.runtime().device() == pb::SIM; }

// With data parallelism: per stage, the gradient bytes its replicas sum each step, in how many
// buckets (cut as GradientBuckets cuts them: whole layers, last first, >= gradient_bucket_bytes)
// and, on the simulated device, the ring all-reduce time of those buckets back to back.
absl::StatusOr<std::string> FormatDataParallel(const AnalyzedPlan& plan) {
  const pb::Pipeline& pipeline = plan.plan.pipeline();
  const int replicas = pipeline.data_parallel();
  const int64_t bucket_bytes = plan.plan.runtime().gradient_bucket_bytes();
  std::optional<SimCosts> costs;
  if (TimedInMs(plan.plan)) {
    ASSIGN_OR_RETURN(costs, SimCosts::Create(plan.plan.runtime().sim(), MicroBatchSize(plan.plan)));
  }
  const bool sharded = plan.plan.training().shard_optimizer_state();
  std::string out =
      absl::StrCat("\ndata parallel: ", replicas, " replicas of the pipeline, ",
                   int64_t{pipeline.stages()} * replicas, " processes; each step every stage ",
                   sharded ? "reduce-scatters" : "sums",
                   " its gradients over its replicas, in buckets of >= ", FormatBytes(bucket_bytes),
                   " started as the backward finishes them",
                   sharded ? ", and all-gathers the updated parameters after its optimizer step "
                             "(training.shard_optimizer_state)"
                           : "",
                   "\n");
  absl::StrAppendFormat(&out, "%-6s %13s %8s%s\n", "stage", "gradients", "buckets",
                        !costs    ? ""
                        : sharded ? "  ring reduce-scatter + all-gather (ms, back to back)"
                                  : "  ring all-reduce (ms, back to back)");
  for (int s = 0; s < pipeline.stages(); ++s) {
    // The stage's parts from the last (its last chunk) to the first, layers last first: the
    // order the backward finishes them, cut by the runtime's rule.
    std::vector<int64_t> layer_bytes;
    for (auto part = plan.stages.rbegin(); part != plan.stages.rend(); ++part) {
      if (part->stage != s) continue;
      for (int l = part->end_layer - 1; l >= part->first_layer; --l) {
        layer_bytes.push_back(plan.layers[l].parameters * static_cast<int64_t>(sizeof(float)));
      }
    }
    std::vector<int64_t> bucket_bytes_of;
    const std::vector<int> assigned = AssignBuckets(layer_bytes, bucket_bytes);
    for (size_t i = 0; i < assigned.size(); ++i) {
      if (assigned[i] < 0) continue;
      if (assigned[i] >= static_cast<int>(bucket_bytes_of.size())) bucket_bytes_of.push_back(0);
      bucket_bytes_of[assigned[i]] += layer_bytes[i];
    }
    int64_t total = 0;
    double ms = 0;  // the all-reduce, or the reduce-scatter (the all-gather takes as long)
    for (int64_t bytes : bucket_bytes_of) {
      total += bytes;
      if (costs) {
        ms += absl::ToDoubleMilliseconds(sharded ? costs->RingPass(bytes, replicas)
                                                 : costs->AllReduce(bytes, replicas));
      }
    }
    std::string time;
    if (costs)
      time = sharded ? absl::StrFormat("  %.3f + %.3f", ms, ms) : absl::StrFormat("  %.3f", ms);
    absl::StrAppendFormat(&out, "%-6d %13s %8d%s\n", s, FormatBytes(total),
                          static_cast<int>(bucket_bytes_of.size()), time);
  }
  return out;
}

// The skip connections whose ends sit on different parts: which stage sends what to which.
absl::StatusOr<std::string> FormatSkipRoutes(const AnalyzedPlan& plan) {
  const std::vector<pb::StageSpec> parts = ToStageSpecs(plan);
  ASSIGN_OR_RETURN(const std::vector<schedule::SkipRoute> routes,
                   SkipRoutesOf(plan.plan.model(), parts));
  if (routes.empty()) return std::string();
  const bool chunked = plan.plan.pipeline().virtual_stages() > 1;
  const auto where = [&](int part) {
    const StageInfo& info = plan.stages[part];
    return chunked ? absl::StrCat("stage ", info.stage, " chunk ", info.chunk)
                   : absl::StrCat("stage ", info.stage);
  };
  std::string out =
      "\nskip connections across stages (each output sent straight to the stage that joins it, "
      "its gradient straight back; per micro-batch)\n";
  const int64_t samples = MicroBatchSize(plan.plan);
  const int64_t element = SizeOf(BoundaryDType(plan.plan.training()));
  for (const schedule::SkipRoute& route : routes) {
    const LayerInfo& producer = plan.layers[route.producer];
    absl::StrAppend(&out, "  ", plan.layers[route.layer].name, " <- ", producer.name, ": ",
                    where(route.from), " -> ", where(route.to), ", ",
                    FormatBytes(producer.output_shape.num_elements() * element * samples), "\n");
  }
  return out;
}

// pipeline.offload: each stage's host memory and the copies the schedule must hide.
std::string FormatOffload(const pb::Plan& plan,
                          const std::vector<StageActivationMemory>& activations) {
  const double gbps = plan.runtime().sim().host_link_gbps();
  std::string out = absl::StrCat(
      "\noffloaded stage inputs (pipeline.offload STAGE_INPUTS; the table's boundary column is "
      "what stays on the device)\n");
  absl::StrAppendFormat(&out, "%-6s %13s %13s %15s\n", "stage", "host peak", "moved/step",
                        "copies ms/step");
  for (size_t s = 0; s < activations.size(); ++s) {
    const StageActivationMemory& m = activations[s];
    // Out and back again, each direction at the host link's bandwidth.
    const double copy_ms = 2.0 * static_cast<double>(m.offloaded) / (gbps * 1e9) * 1e3;
    absl::StrAppendFormat(&out, "%-6d %13s %13s %15.3f\n", s, FormatBytes(m.host),
                          FormatBytes(m.offloaded), copy_ms);
  }
  absl::StrAppend(&out, "(copies at ", absl::StrFormat("%g", gbps),
                  " GB/s each way, runtime.sim.host_link_gbps; each copy back starts with the "
                  "compute instruction before its backward and overlaps it)\n");
  return out;
}

}  // namespace

absl::StatusOr<std::string> FormatPlanReport(const AnalyzedPlan& plan,
                                             const LayerRegistry& registry, bool with_schedule) {
  const pb::Pipeline& pipeline = plan.plan.pipeline();
  std::string out = absl::StrCat(
      "plan '", plan.plan.name(), "' is valid: ", plan.layers.size(), " layers, ",
      pipeline.stages(), " stages, ",
      pipeline.data_parallel() > 1
          ? absl::StrCat(pipeline.data_parallel(), " data-parallel replicas, ")
          : std::string(),
      pipeline.micro_batches(), " micro-batches of ", MicroBatchSize(plan.plan), " samples\n\n");
  absl::StrAppend(&out, FormatStageTable(plan));
  ASSIGN_OR_RETURN(const std::string skips, FormatSkipRoutes(plan));
  absl::StrAppend(&out, skips);
  if (!with_schedule) return out;

  ASSIGN_OR_RETURN(const SchedulePrediction prediction, PredictSchedule(plan, registry));
  const int stages = pipeline.stages();
  absl::StrAppend(&out, "\nschedule ", ScheduleName(pipeline),
                  TimedInMs(plan.plan)
                      ? " (time in ms on the simulated device, from runtime.sim's costs)\n"
                      : " (time in units of a mean stage's forward; the input-gradient and "
                        "weight-gradient halves of a backward each cost a forward)\n",
                  schedule::DrawGrid(prediction.program, prediction.simulation));
  absl::StrAppendFormat(
      &out,
      "\npredicted step time %.2f%s, bubble %s (GPipe formula (K-1)/(M+K-1) = "
      "%s)\n",
      prediction.simulation.makespan, TimedInMs(plan.plan) ? " ms" : "",
      Percent(prediction.simulation.bubble_fraction),
      Percent(static_cast<double>(stages - 1) / (pipeline.micro_batches() + stages - 1)));
  absl::StrAppend(&out, "\npredicted peak memory per stage (",
                  plan.plan.training().precision() == pb::BF16 ? "bf16 activations" : "fp32",
                  ", remat ", pb::Remat_Name(pipeline.remat()),
                  pipeline.offload() == pb::STAGE_INPUTS ? ", offload STAGE_INPUTS" : "",
                  "; live = most micro-batches forwarded and not yet backwarded)\n");
  absl::StrAppendFormat(&out, "%-6s %6s %6s %13s %13s %13s %13s %13s %13s\n", "stage", "live",
                        "bubble", "parameters", "optimizer", "boundary", "activation",
                        "boundary_grad", "total");
  for (int s = 0; s < stages; ++s) {
    const StageActivationMemory& m = prediction.activations[s];
    absl::StrAppendFormat(
        &out, "%-6d %6d %6s %13s %13s %13s %13s %13s %13s\n", s,
        prediction.simulation.peak_live_activations[s],
        Percent(prediction.simulation.stage_bubble[s]),
        FormatBytes(prediction.parameter_bytes[s] - prediction.optimizer_bytes[s]),
        FormatBytes(prediction.optimizer_bytes[s]), FormatBytes(m.boundary),
        FormatBytes(m.activation), FormatBytes(m.boundary_grad),
        FormatBytes(prediction.parameter_bytes[s] + m.total));
  }
  if (plan.plan.training().shard_optimizer_state() && pipeline.data_parallel() > 1) {
    absl::StrAppend(&out, "(parameters: f32 values and gradients; optimizer: this replica's 1/",
                    pipeline.data_parallel(),
                    " of the optimizer state, training.shard_optimizer_state)\n");
  }
  if (pipeline.offload() == pb::STAGE_INPUTS) {
    absl::StrAppend(&out, FormatOffload(plan.plan, prediction.activations));
  }
  if (pipeline.data_parallel() > 1) {
    ASSIGN_OR_RETURN(const std::string data_parallel, FormatDataParallel(plan));
    absl::StrAppend(&out, data_parallel);
  }
  return out;
}

absl::StatusOr<std::string> FormatScheduleComparison(const LoadedPlan& loaded,
                                                     const LayerRegistry& registry) {
  const pb::Pipeline& base = loaded.plan.pipeline();
  const int interleave = std::max(2, base.virtual_stages());
  struct Candidate {
    pb::Schedule kind;
    int virtual_stages;
  };
  const Candidate candidates[] = {
      {pb::GPIPE, 1},          {pb::ONE_F_ONE_B, 1},    {pb::INTERLEAVED_1F1B, interleave},
      {pb::ZERO_BUBBLE_H1, 1}, {pb::ZERO_BUBBLE_H2, 1}, {pb::ZERO_BUBBLE_V, 2},
      {pb::DUALPIPE_V, 2}};
  std::string out =
      absl::StrCat("schedules for ", base.stages(), " stages x ", base.micro_batches(),
                   " micro-batches (remat ", pb::Remat_Name(base.remat()),
                   TimedInMs(loaded.plan) ? "; time in ms on the simulated device"
                                          : "; time in units of a mean stage's forward",
                   "; memory of the fullest stage)\n");
  absl::StrAppendFormat(&out, "%-22s %9s %8s %6s %13s %13s %13s %13s\n", "schedule", "step time",
                        "bubble", "live", "boundary", "activation", "boundary_grad", "total");
  std::string skipped;
  for (const Candidate& candidate : candidates) {
    LoadedPlan variant = loaded;
    pb::Pipeline& pipeline = *variant.plan.mutable_pipeline();
    pipeline.set_schedule(candidate.kind);
    pipeline.set_virtual_stages(candidate.virtual_stages);
    pipeline.clear_custom();  // a CUSTOM plan's actions and placement belong to it alone
    pipeline.clear_placement();
    pipeline.clear_schedule_csv();
    if (candidate.virtual_stages != base.virtual_stages()) pipeline.clear_boundaries();
    const std::string name = ScheduleName(pipeline);
    absl::StatusOr<AnalyzedPlan> analyzed = AnalyzePlan(variant, registry);
    absl::StatusOr<SchedulePrediction> prediction =
        analyzed.ok() ? PredictSchedule(*analyzed, registry)
                      : absl::StatusOr<SchedulePrediction>(analyzed.status());
    if (!prediction.ok()) {
      // The first line of the reason is enough: it says what to change.
      const std::string reason(prediction.status().message());
      absl::StrAppend(&skipped, "  ", name, ": ", reason.substr(0, reason.find('\n')), "\n");
      continue;
    }
    int live = 0;
    StageActivationMemory fullest;
    for (size_t s = 0; s < prediction->activations.size(); ++s) {
      live = std::max(live, prediction->simulation.peak_live_activations[s]);
      if (prediction->activations[s].total > fullest.total) {
        fullest = prediction->activations[s];
      }
    }
    absl::StrAppendFormat(&out, "%-22s %9.2f %8s %6d %13s %13s %13s %13s\n", name,
                          prediction->simulation.makespan,
                          Percent(prediction->simulation.bubble_fraction), live,
                          FormatBytes(fullest.boundary), FormatBytes(fullest.activation),
                          FormatBytes(fullest.boundary_grad), FormatBytes(fullest.total));
  }
  if (!skipped.empty()) absl::StrAppend(&out, "not applicable:\n", skipped);
  return out;
}

}  // namespace gpipe
