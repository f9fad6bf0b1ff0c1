// The pipeline section: stages, micro-batches, schedule, data_parallel and explicit boundaries.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/plan/settings_check_helpers.h"
#include "runtime/plan/settings_checks.h"
#include "runtime/schedule/schedule_shape.h"

namespace gpipe {
namespace {

// Parts per stage the partition cuts: virtual_stages under INTERLEAVED_1F1B, the V schedules and
// CUSTOM (ResolvePlacement and ResolveCustomSchedule have set it), else 1 (a virtual_stages set for
// another schedule is reported once, by CheckSchedule).
int PartsPerStage(const pb::Pipeline& pipeline) {
  const pb::Schedule kind = pipeline.schedule();
  const bool chunked = kind == pb::INTERLEAVED_1F1B || kind == pb::CUSTOM ||
                       kind == pb::ZERO_BUBBLE_V || kind == pb::DUALPIPE_V;
  return chunked ? std::max(1, pipeline.virtual_stages()) : 1;
}

void CheckBoundaries(const pb::Plan& plan, PlanErrors& errors) {
  const pb::Pipeline& pipeline = plan.pipeline();
  const int count = pipeline.boundaries_size();
  if (count == 0) return;
  const int stages = pipeline.stages();
  const int chunks = PartsPerStage(pipeline);
  if (stages >= 1 && chunks == 1 && count != stages - 1) {
    errors.Add("pipeline.boundaries",
               absl::StrCat("lists ", count, " layer name(s) but pipeline.stages ", stages,
                            " needs ", stages - 1,
                            " (the first layer of each stage after the first); fix the list, or "
                            "remove it to let the balancer choose"));
  } else if (stages >= 1 && chunks > 1 && count != stages * chunks - 1) {
    errors.Add("pipeline.boundaries",
               absl::StrCat("lists ", count, " layer name(s) but pipeline.stages ", stages, " x ",
                            "pipeline.virtual_stages ", chunks, " parts need ", stages * chunks - 1,
                            " (the first layer of each part after the first, in model order); "
                            "fix the list, or remove it to let the balancer choose"));
  }
  const pb::Model& model = plan.model();
  const auto index = LayerIndex(model);
  int previous = -1;
  std::string previous_name;
  for (int b = 0; b < count; ++b) {
    const std::string field = absl::StrCat("pipeline.boundaries[", b, "]");
    const std::string& name = pipeline.boundaries(b);
    auto it = index.find(name);
    if (it == index.end()) {
      errors.Add(field, absl::StrCat("no layer is named '", name,
                                     "'; name one of: ", LayerNamesForHelp(model)));
      continue;
    }
    const int layer = it->second;
    if (layer == 0) {
      errors.Add(field, absl::StrCat("'", name,
                                     "' is the model's first layer, which always starts stage 0, "
                                     "so stage 0 would be empty; name the first layer of stage 1"));
    } else if (layer <= previous) {
      errors.Add(field,
                 absl::StrCat("'", name, "' (model.layers[", layer, "]) does not come after '",
                              previous_name, "' (model.layers[", previous,
                              "]); list boundaries in model order, each stage "
                              "non-empty"));
    }
    previous = std::max(previous, layer);
    if (previous == layer) previous_name = name;
  }
}

void CheckSchedule(const pb::Pipeline& pipeline, PlanErrors& errors) {
  if (schedule::IsForwardOnly(pipeline.schedule())) {
    errors.Add("pipeline.schedule",
               absl::StrCat(pb::Schedule_Name(pipeline.schedule()),
                            " is forward-only (it evaluates, it cannot train); choose a training "
                            "schedule: GPIPE, ONE_F_ONE_B, INTERLEAVED_1F1B, ZERO_BUBBLE_H1, "
                            "ZERO_BUBBLE_H2, ZERO_BUBBLE_V, DUALPIPE_V or CUSTOM"));
    return;
  }
  if (pipeline.virtual_stages() < 1) {
    errors.Add("pipeline.virtual_stages",
               absl::StrCat("is ", pipeline.virtual_stages(), "; it must be >= 1"));
    return;
  }
  if (pipeline.stages() < 1 || pipeline.micro_batches() < 1) return;  // reported already
  const absl::Status shape = schedule::CheckScheduleShape(
      pipeline.schedule(), pipeline.stages(), pipeline.micro_batches(), pipeline.virtual_stages());
  if (shape.ok()) return;
  // Blame the field the user most likely has to change.
  const int stages = pipeline.stages();
  const int micro_batches = pipeline.micro_batches();
  const bool interleaved = pipeline.schedule() == pb::INTERLEAVED_1F1B;
  const bool v_shape =
      pipeline.schedule() == pb::ZERO_BUBBLE_V || pipeline.schedule() == pb::DUALPIPE_V;
  std::string field = "pipeline.schedule";
  if ((pipeline.virtual_stages() != 1 && !interleaved && !v_shape) ||
      (v_shape && pipeline.virtual_stages() != 2)) {
    field = "pipeline.virtual_stages";
  } else if (int64_t{stages} * pipeline.virtual_stages() * micro_batches >
             schedule::kMaxStageMicroBatches) {
    field = "pipeline.micro_batches";
  }
  errors.Add(field, std::string(shape.message()));
}

}  // namespace

std::vector<int64_t> DivisorsNear(int64_t n, int64_t wanted, int count) {
  // Candidates up to sqrt(n), capped so a huge global_batch cannot stall validation.
  constexpr int64_t kMaxCandidates = 1'000'000;
  std::vector<int64_t> divisors;
  for (int64_t d = 1; d <= n / d && d <= kMaxCandidates; ++d) {
    if (n % d != 0) continue;
    divisors.push_back(d);
    if (d != n / d) divisors.push_back(n / d);
  }
  auto distance = [wanted](int64_t d) { return d > wanted ? d - wanted : wanted - d; };
  std::sort(divisors.begin(), divisors.end(), [&](int64_t a, int64_t b) {
    return distance(a) != distance(b) ? distance(a) < distance(b) : a < b;
  });
  if (static_cast<int>(divisors.size()) > count) divisors.resize(count);
  std::sort(divisors.begin(), divisors.end());
  return divisors;
}

void CheckPipeline(const pb::Plan& plan, PlanErrors& errors) {
  const pb::Pipeline& pipeline = plan.pipeline();
  const int layers = plan.model().layers_size();
  const int chunks = PartsPerStage(pipeline);
  if (pipeline.stages() < 1) {
    errors.Add("pipeline.stages",
               absl::StrCat("is ", pipeline.stages(), "; it must be >= 1 (one process per stage)"));
  } else if (layers >= 1 && pipeline.stages() > layers) {
    errors.Add("pipeline.stages",
               absl::StrCat(pipeline.stages(), " stages need at least ", pipeline.stages(),
                            " layers but the model has ", layers,
                            "; set pipeline.stages to at most ", layers));
  } else if (layers >= 1 && int64_t{pipeline.stages()} * chunks > layers) {
    errors.Add(
        "pipeline.virtual_stages",
        absl::StrCat(pipeline.stages(), " stages x ", chunks, " chunks need at least ",
                     int64_t{pipeline.stages()} * chunks, " layers but the model has ", layers,
                     "; use fewer stages or chunks (this model allows ", layers / pipeline.stages(),
                     " chunk(s) per stage with ", pipeline.stages(), " stages)"));
  }
  if (pipeline.micro_batches() < 1) {
    errors.Add("pipeline.micro_batches",
               absl::StrCat("is ", pipeline.micro_batches(), "; it must be >= 1"));
  }
  if (pipeline.data_parallel() < 1) {
    errors.Add("pipeline.data_parallel",
               absl::StrCat("is ", pipeline.data_parallel(),
                            "; it must be >= 1 (replicas of the whole pipeline)"));
  }
  if (pipeline.offload() == pb::STAGE_INPUTS && pipeline.remat() == pb::NEVER) {
    errors.Add("pipeline.offload",
               "STAGE_INPUTS moves the stage inputs of re-materialized micro-batches, and remat "
               "NEVER keeps every micro-batch's activations on the device (which hold the input "
               "too); set pipeline.remat to ALWAYS or EXCEPT_LAST");
  }
  CheckSchedule(pipeline, errors);
  CheckBoundaries(plan, errors);
}

}  // namespace gpipe
