#include "runtime/estimate/plan_balance.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "layers/layer.h"
#include "runtime/core/byte_format.h"
#include "runtime/core/status_macros.h"
#include "runtime/estimate/schedule_prediction.h"
#include "runtime/estimate/sim_costs.h"
#include "runtime/exec/stage_model.h"
#include "runtime/plan/boundary_dtype.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/timed_partition.h"

namespace gpipe {
namespace {

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// `loaded` with K stages, the given boundaries (none: the plan's balance rule chooses), timed on
// the simulated device so the prediction is in milliseconds.
LoadedPlan Variant(const LoadedPlan& loaded, int stages, const std::vector<std::string>& boundaries,
                   pb::Balance balance) {
  LoadedPlan out = loaded;
  pb::Pipeline& pipeline = *out.plan.mutable_pipeline();
  pipeline.set_stages(stages);
  pipeline.clear_boundaries();
  for (const std::string& name : boundaries) pipeline.add_boundaries(name);
  pipeline.set_balance(balance);
  out.plan.mutable_runtime()->set_device(pb::SIM);
  return out;
}

std::vector<std::string> BoundaryNames(const AnalyzedPlan& plan, const std::vector<int>& starts) {
  std::vector<std::string> names;
  for (size_t s = 1; s < starts.size(); ++s) names.push_back(plan.layers[starts[s]].name);
  return names;
}

absl::StatusOr<BalanceCandidate> Predict(const LoadedPlan& variant, const LayerRegistry& registry,
                                         std::string method, int64_t memory_limit) {
  ASSIGN_OR_RETURN(const AnalyzedPlan analyzed, AnalyzePlan(variant, registry));
  ASSIGN_OR_RETURN(const SchedulePrediction prediction, PredictSchedule(analyzed, registry));
  BalanceCandidate c;
  c.method = std::move(method);
  for (const StageInfo& part : analyzed.stages) {
    c.starts.push_back(part.first_layer);
    c.first_layers.push_back(analyzed.layers[part.first_layer].name);
  }
  c.step_ms = prediction.simulation.makespan;
  for (size_t s = 0; s < prediction.activations.size(); ++s) {
    c.stage_bytes.push_back(prediction.parameter_bytes[s] + prediction.activations[s].total);
    if (memory_limit > 0 && c.stage_bytes.back() > memory_limit) c.fits = false;
  }
  return c;
}

// What one micro-batch keeps for the backward, per layer, so that a stage [j, t) keeps
// input[j] + the sum of saved[j..t) (the stage input is boundary memory, held either way).
// Each tensor a layer saves is counted once, at the layer that saves it first: its own new
// tensors and output at the producer, an input at the consumer (unless its producer saves it
// too), mirroring activation_memory.cc's storage accounting. A layer whose output is a view of
// its input passes the storage on.
struct LayerBytes {
  std::vector<int64_t> saved;
  std::vector<int64_t> input;  // the stage input's bytes beyond what saved[l] already holds
};

absl::StatusOr<LayerBytes> MeasureLayerBytes(const AnalyzedPlan& plan,
                                             const LayerRegistry& registry,
                                             int64_t micro_batch_size) {
  const int n = static_cast<int>(plan.layers.size());
  ASSIGN_OR_RETURN(
      const StageModel model,
      StageModel::Create(plan.plan.model(), 0, n, plan.layers[0].input_shape, registry));
  // Layer outputs and the activations composites keep inside are stored as training.precision
  // makes them (2 bytes under BF16); the model's input is the data set's f32.
  const int64_t activation_size = SizeOf(BoundaryDType(plan.plan.training()));
  LayerBytes out;
  out.saved.assign(n, 0);
  std::vector<int> storage(n);  // whose allocation layer l's output is (-1: the model input)
  for (int l = 0; l < n; ++l) {
    storage[l] = !model.layer(l).OutputAliasesInput() ? l : (l == 0 ? -1 : storage[l - 1]);
    out.input.push_back(plan.layers[l].input_shape.num_elements() *
                        (l == 0 ? SizeOf(DType::kF32) : activation_size) * micro_batch_size);
  }
  std::vector<bool> counted(n, false);
  for (int l = 0; l < n; ++l) {
    const Layer& layer = model.layer(l);
    for (const SavedSpec& spec : layer.SavedPerSample()) {
      if (spec.ref == SavedRef::kNew) {
        out.saved[l] += spec.NewBytes(micro_batch_size, activation_size);
        continue;
      }
      const int s = spec.ref == SavedRef::kOutput ? storage[l] : (l == 0 ? -1 : storage[l - 1]);
      if (s < 0 || counted[s]) continue;
      counted[s] = true;
      const int64_t bytes =
          plan.layers[s].output_shape.num_elements() * activation_size * micro_batch_size;
      out.saved[l] += bytes;
      // Saved as this layer's input: when a stage starts here, that is the stage input.
      if (spec.ref == SavedRef::kInput && s == l - 1) out.input[l] -= bytes;
    }
  }
  return out;
}

// BalancePlan at the plan's pipeline.offload.
absl::StatusOr<BalanceResult> BalanceAt(const LoadedPlan& loaded, const LayerRegistry& registry,
                                        const BalanceOptions& options) {
  const pb::Pipeline& pipeline = loaded.plan.pipeline();
  if (pipeline.virtual_stages() > 1 || pipeline.schedule() == pb::CUSTOM) {
    return absl::InvalidArgumentError(
        "balance: chunked stages (pipeline.virtual_stages > 1: INTERLEAVED_1F1B, ZERO_BUBBLE_V, "
        "DUALPIPE_V) and CUSTOM schedules are not supported; balance with virtual_stages: 1 and a "
        "one-chunk schedule, and give the boundaries of each chunk by hand");
  }
  const int stages = options.stages > 0 ? options.stages : pipeline.stages();
  if (options.memory_limit < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("balance: the memory limit must be >= 0 bytes, got ", options.memory_limit));
  }
  // The plan at K stages (any partition): the schedule decides how many micro-batches each
  // stage keeps alive, whatever the partition.
  ASSIGN_OR_RETURN(const AnalyzedPlan at_k,
                   AnalyzePlan(Variant(loaded, stages, {}, pb::PARAMETERS), registry));
  ASSIGN_OR_RETURN(const SchedulePrediction schedule, PredictSchedule(at_k, registry));
  const int layers = static_cast<int>(at_k.layers.size());
  const int micro_batches = at_k.plan.pipeline().micro_batches();
  const int64_t micro_batch_size = MicroBatchSize(at_k.plan);
  ASSIGN_OR_RETURN(const LayerBytes bytes, MeasureLayerBytes(at_k, registry, micro_batch_size));
  ASSIGN_OR_RETURN(const SimCosts costs,
                   SimCosts::Create(at_k.plan.runtime().sim(), micro_batch_size));

  const bool remat = at_k.plan.pipeline().remat() != pb::NEVER;
  PartitionProblem problem;
  problem.stages = stages;
  problem.micro_batches = micro_batches;
  problem.memory_limit = options.memory_limit;
  // Offloaded stage inputs wait in host memory: on the device, the one in use and the one coming
  // back (MicroBatchPlan's prefetch distance of one compute instruction).
  const bool offload = at_k.plan.pipeline().offload() == pb::STAGE_INPUTS;
  for (int s = 0; s < stages; ++s) {
    const int live = std::max(1, schedule.simulation.peak_live_activations[s]);
    problem.live.push_back(offload ? std::min(live, 2) : live);
  }
  for (int i = 0; i < layers; ++i) {
    const LayerInfo& layer = at_k.layers[i];
    const SimOpTimes times = costs.ForLayer(layer.name, layer.flops_per_sample / 3.0);
    PartitionLayer l;
    // A re-materializing backward runs the forward again.
    l.time = Ms(times.forward) * (remat ? 2 : 1) + Ms(times.backward_input + times.backward_weight);
    const int64_t input = layer.input_shape.num_elements() * 4 * micro_batch_size;
    l.cut_before = 2 * Ms(costs.Transfer(input));  // the stage input, then its gradient
    l.fixed_bytes =
        std::llround(ParameterBytes(at_k.plan, layer.parameters, layer.product_parameters));
    if (remat) {
      l.fixed_bytes += bytes.saved[i];  // one micro-batch rebuilt during its backward
      l.input_bytes = input;
    } else {
      l.saved_bytes = bytes.saved[i];
      l.input_bytes = bytes.input[i];
    }
    // The input's gradient, held once from the backward to its send. The model stays a lower
    // bound of the replay (receives posted ahead and the output's gradient buffers are left to
    // it): the retry below tightens the limit where the replay overshoots, while a model above
    // the replay would refuse partitions that fit.
    l.input_once_bytes = input;
    problem.layers.push_back(l);
  }
  problem.layers.back().time += Ms(costs.loss());

  // The partitioner's memory model leaves out what the replay of the schedule also counts
  // (gradient buffers in flight, outputs awaiting their send): when the replay of its choice
  // overshoots the limit, ask again with the limit lowered by the overshoot.
  BalanceResult result;
  std::vector<std::string> partitioned;
  int64_t closest = 0;  // the replayed fullest stage of the last choice that overshot
  auto none_fits = [&] {
    return absl::ResourceExhaustedError(absl::StrCat(
        "balance: no partition into ", stages, " stages found whose stages all fit ",
        options.memory_limit, " bytes; the closest is predicted to need ", closest,
        " bytes on its fullest stage (raise the limit, add stages or re-materialize)"));
  };
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<PartitionChoice> choice = PartitionForStepTime(problem);
    if (!choice.ok()) {
      if (attempt > 0 && absl::IsResourceExhausted(choice.status())) return none_fits();
      return choice.status();
    }
    partitioned = BoundaryNames(at_k, choice->starts);
    ASSIGN_OR_RETURN(BalanceCandidate measured,
                     Predict(Variant(loaded, stages, partitioned, pb::PARAMETERS), registry,
                             "measured cost and memory", options.memory_limit));
    if (measured.fits) {
      result.candidates.push_back(std::move(measured));
      break;
    }
    closest = *std::max_element(measured.stage_bytes.begin(), measured.stage_bytes.end());
    // Lower by the overshoot, at least 1/512 of the limit, doubling each time.
    const int64_t step = std::max(closest - options.memory_limit, options.memory_limit / 512)
                         << attempt;
    if (attempt == 7 || problem.memory_limit <= step) return none_fits();
    problem.memory_limit -= step;
  }
  for (const auto& [balance, name] :
       {std::pair{pb::PARAMETERS, "balance PARAMETERS"}, std::pair{pb::FLOPS, "balance FLOPS"}}) {
    ASSIGN_OR_RETURN(BalanceCandidate c, Predict(Variant(loaded, stages, {}, balance), registry,
                                                 name, options.memory_limit));
    result.candidates.push_back(std::move(c));
  }
  std::vector<int> equal;
  for (int s = 0; s < stages; ++s) equal.push_back(static_cast<int>(int64_t{s} * layers / stages));
  ASSIGN_OR_RETURN(BalanceCandidate even,
                   Predict(Variant(loaded, stages, BoundaryNames(at_k, equal), pb::PARAMETERS),
                           registry, "equal layer counts", options.memory_limit));
  result.candidates.push_back(std::move(even));

  // The partitioner's flow-shop model and the schedule's simulation can disagree by a little;
  // the simulation decides: the fastest candidate that fits (the partitioner's on ties).
  result.chosen = 0;
  for (size_t i = 1; i < result.candidates.size(); ++i) {
    const BalanceCandidate& c = result.candidates[i];
    if (c.fits && c.step_ms < result.candidates[result.chosen].step_ms) result.chosen = i;
  }
  result.plan = loaded.plan;
  pb::Pipeline& out = *result.plan.mutable_pipeline();
  out.set_stages(stages);
  out.clear_boundaries();
  for (const std::string& name : BoundaryNames(at_k, result.candidates[result.chosen].starts)) {
    out.add_boundaries(name);
  }
  return result;
}

}  // namespace

absl::StatusOr<BalanceResult> BalancePlan(const LoadedPlan& loaded, const LayerRegistry& registry,
                                          const BalanceOptions& options) {
  absl::StatusOr<BalanceResult> result = BalanceAt(loaded, registry, options);
  const pb::Pipeline& pipeline = loaded.plan.pipeline();
  if (!absl::IsResourceExhausted(result.status()) || pipeline.offload() == pb::STAGE_INPUTS ||
      pipeline.remat() == pb::NEVER) {
    return result;
  }
  // Nothing fits with the stage inputs on the device: try again with them in host memory.
  LoadedPlan offloaded = loaded;
  offloaded.plan.mutable_pipeline()->set_offload(pb::STAGE_INPUTS);
  absl::StatusOr<BalanceResult> with_offload = BalanceAt(offloaded, registry, options);
  if (!with_offload.ok()) return result;  // the first reason says what the plan as written needs
  with_offload->offload_chosen = true;
  return with_offload;
}

absl::Status ResolveProfileBalance(LoadedPlan& loaded, const LayerRegistry& registry) {
  const pb::Pipeline& pipeline = loaded.plan.pipeline();
  if (pipeline.balance() != pb::PROFILE || pipeline.boundaries_size() > 0) {
    return absl::OkStatus();
  }
  absl::StatusOr<BalanceResult> result =
      BalancePlan(loaded, registry,
                  BalanceOptions{.stages = pipeline.stages(),
                                 .memory_limit = loaded.plan.runtime().memory_limit_bytes()});
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat(loaded.LocationOf("pipeline.balance"),
                                     ": pipeline.balance: PROFILE: ", result.status().message()));
  }
  *loaded.plan.mutable_pipeline()->mutable_boundaries() = result->plan.pipeline().boundaries();
  if (result->offload_chosen) loaded.plan.mutable_pipeline()->set_offload(pb::STAGE_INPUTS);
  return absl::OkStatus();
}

std::string FormatBalance(const BalanceResult& result, int64_t memory_limit) {
  std::string out = absl::StrCat(
      "predicted with runtime.sim's costs (as gpipe-plan show on device SIM)",
      memory_limit > 0 ? absl::StrCat("; memory limit ", FormatBytes(memory_limit), " per stage")
                       : std::string(),
      "\n");
  absl::StrAppendFormat(&out, "%-26s %12s %14s %5s  %s\n", "  partition", "step ms",
                        "fullest stage", "fits", "first layer of each stage");
  for (size_t i = 0; i < result.candidates.size(); ++i) {
    const BalanceCandidate& c = result.candidates[i];
    const int64_t fullest = *std::max_element(c.stage_bytes.begin(), c.stage_bytes.end());
    absl::StrAppendFormat(&out, "%-26s %12.2f %14s %5s  %s\n",
                          absl::StrCat(i == result.chosen ? "* " : "  ", c.method), c.step_ms,
                          FormatBytes(fullest), c.fits ? "yes" : "no",
                          absl::StrJoin(c.first_layers, " "));
  }
  const pb::Pipeline& pipeline = result.plan.pipeline();
  absl::StrAppend(
      &out, "\nchosen: --override 'pipeline { stages: ", pipeline.stages(), " boundaries: [",
      absl::StrJoin(
          pipeline.boundaries(), ", ",
          [](std::string* o, const std::string& b) { absl::StrAppend(o, "\"", b, "\""); }),
      "]", result.offload_chosen ? " offload: STAGE_INPUTS" : "", " }'\n");
  if (result.offload_chosen) {
    absl::StrAppend(&out,
                    "(no partition fits with the stage inputs on the device; "
                    "pipeline.offload STAGE_INPUTS moves them to host memory between each "
                    "micro-batch's forward and backward)\n");
  }
  return out;
}

}  // namespace gpipe
