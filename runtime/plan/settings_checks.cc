#include "runtime/plan/settings_checks.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "runtime/data/dataset.h"
#include "runtime/data/open_dataset.h"
#include "runtime/device/sim/sim_profile.h"
#include "runtime/plan/plan_defaults.h"
#include "runtime/schedule/schedule_shape.h"

namespace gpipe {
namespace {

bool Positive(double value) { return std::isfinite(value) && value > 0; }

std::string Show(double value) { return absl::StrCat(value); }

// Indices of the layers by name (the first one when names repeat; that is reported elsewhere).
absl::flat_hash_map<std::string, int> LayerIndex(const pb::Model& model) {
  absl::flat_hash_map<std::string, int> index;
  for (int i = 0; i < model.layers_size(); ++i) index.emplace(model.layers(i).name(), i);
  return index;
}

std::string LayerNamesForHelp(const pb::Model& model) {
  constexpr int kMaxNames = 12;
  std::vector<std::string> names;
  for (int i = 0; i < model.layers_size() && i < kMaxNames; ++i) {
    names.push_back(model.layers(i).name());
  }
  if (model.layers_size() > kMaxNames) names.push_back("...");
  return absl::StrJoin(names, ", ");
}

// Parts per stage the partition cuts: virtual_stages under INTERLEAVED_1F1B, else 1 (a
// virtual_stages set for another schedule is reported once, by CheckSchedule).
int PartsPerStage(const pb::Pipeline& pipeline) {
  return pipeline.schedule() == pb::INTERLEAVED_1F1B ? std::max(1, pipeline.virtual_stages()) : 1;
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

void CheckSgd(const pb::Sgd& sgd, PlanErrors& errors) {
  const std::string at = "training.optimizer.sgd";
  if (!sgd.has_lr()) {
    errors.Add(at + ".lr", "is missing; set the learning rate (> 0), e.g. lr: 0.1");
  } else if (!Positive(sgd.lr())) {
    errors.Add(at + ".lr", absl::StrCat("is ", Show(sgd.lr()), "; the learning rate must be > 0"));
  }
  if (!(std::isfinite(sgd.momentum()) && sgd.momentum() >= 0)) {
    errors.Add(at + ".momentum", absl::StrCat("is ", Show(sgd.momentum()), "; it must be >= 0"));
  }
  if (!std::isfinite(sgd.dampening())) {
    errors.Add(at + ".dampening",
               absl::StrCat("is ", Show(sgd.dampening()), "; it must be a finite number"));
  }
  if (!(std::isfinite(sgd.weight_decay()) && sgd.weight_decay() >= 0)) {
    errors.Add(at + ".weight_decay",
               absl::StrCat("is ", Show(sgd.weight_decay()), "; it must be >= 0"));
  }
  if (sgd.nesterov() && (sgd.momentum() <= 0 || sgd.dampening() != 0)) {
    errors.Add(at + ".nesterov",
               absl::StrCat("Nesterov momentum needs momentum > 0 and dampening 0, but momentum "
                            "is ",
                            Show(sgd.momentum()), " and dampening ", Show(sgd.dampening()),
                            "; set momentum (and dampening: 0) or remove nesterov"));
  }
}

// Adam and AdamW share their fields and limits (torch.optim's checks).
template <typename AdamConfig>
void CheckAdamLike(const AdamConfig& config, const std::string& at, PlanErrors& errors) {
  if (!Positive(config.lr())) {
    errors.Add(at + ".lr",
               absl::StrCat("is ", Show(config.lr()), "; the learning rate must be > 0"));
  }
  for (const auto& [name, beta] : {std::pair<const char*, double>{"beta1", config.beta1()},
                                   std::pair<const char*, double>{"beta2", config.beta2()}}) {
    if (!(beta >= 0 && beta < 1)) {
      errors.Add(absl::StrCat(at, ".", name),
                 absl::StrCat("is ", Show(beta), "; it must be in [0, 1)"));
    }
  }
  if (!(std::isfinite(config.eps()) && config.eps() >= 0)) {
    errors.Add(at + ".eps", absl::StrCat("is ", Show(config.eps()), "; it must be >= 0"));
  }
  if (!(std::isfinite(config.weight_decay()) && config.weight_decay() >= 0)) {
    errors.Add(at + ".weight_decay",
               absl::StrCat("is ", Show(config.weight_decay()), "; it must be >= 0"));
  }
}

void CheckOptimizer(const pb::Training& training, PlanErrors& errors) {
  if (!training.has_optimizer()) {
    errors.Add("training.optimizer",
               "is missing; add e.g. optimizer { sgd { lr: 0.1 } } (or adam {}, adamw {})");
    return;
  }
  const pb::Optimizer& optimizer = training.optimizer();
  switch (optimizer.kind_case()) {
    case pb::Optimizer::kSgd:
      CheckSgd(optimizer.sgd(), errors);
      break;
    case pb::Optimizer::kAdam:
      CheckAdamLike(optimizer.adam(), "training.optimizer.adam", errors);
      break;
    case pb::Optimizer::kAdamw:
      CheckAdamLike(optimizer.adamw(), "training.optimizer.adamw", errors);
      break;
    case pb::Optimizer::KIND_NOT_SET:
      errors.Add("training.optimizer",
                 "has no kind; set one of sgd { lr: ... }, adam {}, adamw {}");
      break;
  }
}

void CheckDataFile(const std::string& field, const std::string& value, const std::string& directory,
                   const std::string& what, PlanErrors& errors) {
  if (value.empty()) {
    errors.Add(field, absl::StrCat("is missing; give the path of ", what,
                                   " (relative paths resolve against the plan's directory)"));
    return;
  }
  const std::string resolved = ResolvePlanPath(directory, value);
  std::error_code error;
  const auto status = std::filesystem::status(resolved, error);
  if (!std::filesystem::exists(status)) {
    errors.Add(field, absl::StrCat("file ", resolved,
                                   " does not exist (relative paths resolve against the plan's "
                                   "directory ",
                                   directory, "); fix the path or create the file"));
  } else if (std::filesystem::is_directory(status)) {
    errors.Add(field, absl::StrCat(resolved, " is a directory; give the path of ", what));
  }
}

// One optional data file field of the plan, for CheckEvalPair.
struct DataFileField {
  std::string field;  // "data.npy.eval_inputs"
  bool has;
  std::string value;
  std::string what;  // what the file holds, for messages
};

// A held-out pair of files: both or neither; each one given must exist.
void CheckEvalPair(const DataFileField& first, const DataFileField& second,
                   const std::string& directory, PlanErrors& errors) {
  if (first.has != second.has) {
    const DataFileField& given = first.has ? first : second;
    const DataFileField& missing = first.has ? second : first;
    errors.Add(missing.field, absl::StrCat("is missing but ", given.field, " is set (at ",
                                           errors.LocationOf(given.field),
                                           "); give both held-out files or neither"));
  }
  for (const DataFileField* file : {&first, &second}) {
    if (file->has) CheckDataFile(file->field, file->value, directory, file->what, errors);
  }
}

void CheckSynthetic(const pb::Synthetic& synthetic, PlanErrors& errors) {
  if (synthetic.num_samples() < 1) {
    errors.Add("data.synthetic.num_samples",
               absl::StrCat("is ", synthetic.num_samples(), "; it must be >= 1"));
  }
  if (!(std::isfinite(synthetic.noise()) && synthetic.noise() >= 0)) {
    errors.Add("data.synthetic.noise",
               absl::StrCat("is ", Show(synthetic.noise()), "; it must be >= 0"));
  }
  if (synthetic.eval_samples() < 0) {
    errors.Add("data.synthetic.eval_samples",
               absl::StrCat("is ", synthetic.eval_samples(),
                            "; it must be >= 0 (the held-out samples; 0: none)"));
  }
}

void CheckNpy(const pb::Npy& npy, const std::string& directory, PlanErrors& errors) {
  const std::string inputs = "a float32 .npy array [N, input shape...]";
  const std::string targets =
      "a .npy array of targets (int64 [N] class ids for softmax_cross_entropy, float32 [N, "
      "output shape...] for mse)";
  CheckDataFile("data.npy.inputs", npy.inputs(), directory, inputs, errors);
  CheckDataFile("data.npy.targets", npy.targets(), directory, targets, errors);
  CheckEvalPair({"data.npy.eval_inputs", npy.has_eval_inputs(), npy.eval_inputs(), inputs},
                {"data.npy.eval_targets", npy.has_eval_targets(), npy.eval_targets(), targets},
                directory, errors);
}

void CheckIdx(const pb::Idx& idx, const std::string& directory, PlanErrors& errors) {
  const std::string images = "an IDX file of uint8 images [N, rows, cols] (plain or gzip)";
  const std::string labels = "an IDX file of uint8 labels [N] (plain or gzip)";
  CheckDataFile("data.idx.train_images", idx.train_images(), directory, images, errors);
  CheckDataFile("data.idx.train_labels", idx.train_labels(), directory, labels, errors);
  CheckEvalPair({"data.idx.test_images", idx.has_test_images(), idx.test_images(), images},
                {"data.idx.test_labels", idx.has_test_labels(), idx.test_labels(), labels},
                directory, errors);
  if (!std::isfinite(idx.mean())) {
    errors.Add("data.idx.mean", absl::StrCat("is ", Show(idx.mean()), "; it must be finite"));
  }
  if (!Positive(idx.std())) {
    errors.Add("data.idx.std",
               absl::StrCat("is ", Show(idx.std()), "; it must be > 0 (pixels are divided by it)"));
  }
}

void CheckText(const pb::Text& text, const std::string& directory, PlanErrors& errors) {
  if (text.paths().empty()) {
    errors.Add("data.text.paths",
               "is empty; list at least one text file, e.g. paths: [\"corpus.txt\"] (relative "
               "paths resolve against the plan's directory)");
  }
  for (int i = 0; i < text.paths_size(); ++i) {
    CheckDataFile(absl::StrCat("data.text.paths[", i, "]"), text.paths(i), directory,
                  "a text file (its bytes are the tokens)", errors);
  }
  const double fraction = text.eval_fraction();
  if (!(fraction >= 0 && fraction < 1)) {
    errors.Add("data.text.eval_fraction",
               absl::StrCat("is ", Show(fraction),
                            "; it must be in [0, 1) (the share of the text held out for "
                            "evaluation; 0: none)"));
  }
}

// model.input must fit the data source: token ids (INT64, shape [seq_len]) come only from
// data.text, and data.text gives nothing else.
void CheckInputMatchesData(const pb::Plan& plan, PlanErrors& errors) {
  const pb::Data& data = plan.data();
  if (data.source_case() == pb::Data::SOURCE_NOT_SET || !plan.has_model() ||
      !plan.model().has_input()) {
    return;
  }
  const pb::Input& input = plan.model().input();
  const bool token_ids = input.type() == pb::INT64;
  // A program's own source serves what it says it does (checked when it is opened).
  if (data.has_custom()) return;
  if (!data.has_text()) {
    if (token_ids) {
      const auto* source = pb::Data::descriptor()->FindFieldByNumber(data.source_case());
      errors.Add("model.input.type",
                 absl::StrCat("is INT64 (token ids) but data.", source->name(),
                              " gives float32 inputs; only data.text gives int64 token ids: set "
                              "type: FLOAT32, or use data { text { paths: ... } }"));
    }
    return;
  }
  if (!token_ids) {
    errors.Add("model.input.type",
               absl::StrCat("is ", pb::InputType_Name(input.type()), " but data.text (at ",
                            errors.LocationOf("data.text"),
                            ") gives int64 token ids (one per byte); set model.input { type: "
                            "INT64 shape: [seq_len] } and a first layer that embeds 256 ids"));
  }
  if (input.shape_size() > 1) {
    errors.Add("model.input.shape",
               absl::StrCat("has ", input.shape_size(), " dimensions but a data.text sample is ",
                            "a window of seq_len token ids; use shape: [seq_len]"));
  }
}

// runtime.sim, checked only when runtime.device is SIM (other devices ignore it, as plan.proto
// documents, so one plan can switch devices with an override).
void CheckSim(const pb::Plan& plan, PlanErrors& errors) {
  const pb::Sim& sim = plan.runtime().sim();
  for (const auto& [name, value] :
       {std::pair<const char*, double>{"peak_gflops", sim.peak_gflops()},
        {"link_gbps", sim.link_gbps()}}) {
    if (!Positive(value)) {
      errors.Add(absl::StrCat("runtime.sim.", name),
                 absl::StrCat("is ", Show(value), "; it must be > 0"));
    }
  }
  for (const auto& [name, value] :
       {std::pair<const char*, double>{"link_latency_us", sim.link_latency_us()},
        {"loss_us", sim.loss_us()},
        {"optimizer_us", sim.optimizer_us()}}) {
    if (!(std::isfinite(value) && value >= 0)) {
      errors.Add(absl::StrCat("runtime.sim.", name),
                 absl::StrCat("is ", Show(value), "; a time must be >= 0 microseconds"));
    }
  }
  const absl::flat_hash_map<std::string, int> layers = LayerIndex(plan.model());
  for (int i = 0; i < sim.layer_costs_size(); ++i) {
    const pb::LayerCost& cost = sim.layer_costs(i);
    const std::string at = absl::StrCat("runtime.sim.layer_costs[", i, "]");
    if (!layers.contains(cost.layer())) {
      errors.Add(at + ".layer",
                 absl::StrCat("'", cost.layer(), "' is not a layer of model.layers (",
                              LayerNamesForHelp(plan.model()),
                              "); name a top-level layer, or remove the entry"));
    }
    for (const auto& [name, value] :
         {std::pair<const char*, double>{"forward_us", cost.forward_us()},
          {"backward_input_us", cost.backward_input_us()},
          {"backward_weight_us", cost.backward_weight_us()}}) {
      if (!(std::isfinite(value) && value >= 0)) {
        errors.Add(absl::StrCat(at, ".", name),
                   absl::StrCat("is ", Show(value), "; a time must be >= 0 microseconds"));
      }
    }
  }
  if (!sim.profile().empty()) {  // an empty path means none, as for the cost table
    const absl::StatusOr<SimProfile> profile = LoadSimProfile(sim.profile());
    if (!profile.ok()) {
      errors.Add("runtime.sim.profile",
                 absl::StrCat(profile.status().message(),
                              " (relative paths resolve against the working directory)"));
    }
  }
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

void CheckSchedule(const pb::Pipeline& pipeline, PlanErrors& errors) {
  if (schedule::IsForwardOnly(pipeline.schedule())) {
    errors.Add("pipeline.schedule",
               absl::StrCat(pb::Schedule_Name(pipeline.schedule()),
                            " is forward-only (it evaluates, it cannot train); choose a training "
                            "schedule: GPIPE, ONE_F_ONE_B, INTERLEAVED_1F1B, ZERO_BUBBLE_H1 or "
                            "ZERO_BUBBLE_H2"));
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
  std::string field = "pipeline.schedule";
  if (pipeline.virtual_stages() != 1 && !interleaved) {
    field = "pipeline.virtual_stages";
  } else if ((interleaved && stages >= 2 && pipeline.virtual_stages() >= 2 &&
              micro_batches % stages != 0) ||
             int64_t{stages} * pipeline.virtual_stages() * micro_batches >
                 schedule::kMaxStageMicroBatches) {
    field = "pipeline.micro_batches";
  }
  errors.Add(field, std::string(shape.message()));
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
  CheckSchedule(pipeline, errors);
  CheckBoundaries(plan, errors);
}

void CheckTraining(const pb::Plan& plan, PlanErrors& errors) {
  if (!plan.has_training()) {
    errors.Add("training",
               "is missing; add e.g. training { global_batch: 64 steps: 100 optimizer { sgd { "
               "lr: 0.1 } } }");
    return;
  }
  const pb::Training& training = plan.training();
  if (!training.has_global_batch()) {
    errors.Add("training.global_batch",
               "is missing; set the samples per optimizer step, e.g. global_batch: 64");
  } else if (training.global_batch() < 1) {
    errors.Add("training.global_batch",
               absl::StrCat("is ", training.global_batch(), "; it must be >= 1"));
  } else {
    const int64_t batch = training.global_batch();
    const int64_t micro_batches = plan.pipeline().micro_batches();
    const int64_t replicas = plan.pipeline().data_parallel();
    if (replicas > 1 && micro_batches >= 1 && batch % (replicas * micro_batches) != 0) {
      const int64_t per_replica = batch % replicas == 0 ? batch / replicas : 0;
      errors.Add(
          "training.global_batch",
          absl::StrCat(
              "is ", batch, ", not divisible by data_parallel ", replicas, " x micro_batches ",
              micro_batches, " = ", replicas * micro_batches,
              " (each replica splits its global_batch / data_parallel samples into "
              "micro_batches micro-batches); use a multiple of ",
              replicas * micro_batches,
              per_replica > 0
                  ? absl::StrCat(", or micro_batches dividing ", per_replica, " such as ",
                                 absl::StrJoin(DivisorsNear(per_replica, micro_batches, 5), ", "))
                  : std::string()));
    } else if (micro_batches >= 1 && batch % micro_batches != 0) {
      errors.Add("pipeline.micro_batches",
                 absl::StrCat("global_batch ", batch, " is not divisible by micro_batches ",
                              micro_batches, "; choose a divisor of ", batch, " such as ",
                              absl::StrJoin(DivisorsNear(batch, micro_batches, 5), ", "),
                              " (or change training.global_batch at ",
                              errors.LocationOf("training.global_batch"), ")"));
    }
  }
  if (!training.has_steps()) {
    errors.Add("training.steps", "is missing; set the number of optimizer steps, e.g. steps: 100");
  } else if (training.steps() < 1) {
    errors.Add("training.steps", absl::StrCat("is ", training.steps(), "; it must be >= 1"));
  }
  if (training.eval_every() < 0) {
    errors.Add("training.eval_every",
               absl::StrCat("is ", training.eval_every(), "; it must be >= 0 (0: never)"));
  } else if (training.eval_every() > 0 && plan.has_data() && !HasEvalSplit(plan.data())) {
    errors.Add("training.eval_every",
               absl::StrCat("is ", training.eval_every(),
                            " but the data has no held-out split to evaluate: set "
                            "data.synthetic.eval_samples, data.npy.eval_inputs and eval_targets, "
                            "data.idx.test_images and test_labels, data.text.eval_fraction > 0, "
                            "or data.custom.eval_split for a program's source that has one (or "
                            "set eval_every to 0)"));
  }
  if (training.eval_samples() < 0) {
    errors.Add("training.eval_samples",
               absl::StrCat("is ", training.eval_samples(), "; it must be >= 0 (0: all)"));
  }
  if (training.max_skipped_steps() < 0) {
    errors.Add("training.max_skipped_steps",
               absl::StrCat("is ", training.max_skipped_steps(),
                            "; use 0 (never stop for skipped steps) or a count >= 1"));
  }
  CheckOptimizer(training, errors);
}

void CheckCheckpoint(const pb::Plan& plan, PlanErrors& errors) {
  if (!plan.has_checkpoint()) return;
  const pb::Checkpoint& checkpoint = plan.checkpoint();
  if (checkpoint.dir().empty()) {
    errors.Add("checkpoint", "has no dir; set checkpoint { dir: \"ckpt\" } (or remove it)");
  }
  if (checkpoint.every_steps() < 0) {
    errors.Add("checkpoint.every_steps",
               absl::StrCat("is ", checkpoint.every_steps(),
                            "; use 0 (only when stopped by a signal) or a step interval >= 1"));
  }
  if (checkpoint.keep_last() < 0) {
    errors.Add("checkpoint.keep_last",
               absl::StrCat("is ", checkpoint.keep_last(), "; use 0 (keep all) or a count >= 1"));
  }
  if (plan.runtime().device() == pb::SIM) {
    errors.Add("checkpoint",
               "is set but runtime.device is SIM, whose tensors hold no values to "
               "save; remove checkpoint or use device CPU or CUDA");
  }
}

void CheckData(const pb::Plan& plan, const std::string& directory, PlanErrors& errors) {
  if (!plan.has_data()) {
    errors.Add("data",
               "is missing; add data { synthetic {} } or data { npy { inputs: \"x.npy\" "
               "targets: \"y.npy\" } }");
    return;
  }
  const pb::Data& data = plan.data();
  switch (data.source_case()) {
    case pb::Data::kSynthetic:
      CheckSynthetic(data.synthetic(), errors);
      break;
    case pb::Data::kNpy:
      CheckNpy(data.npy(), directory, errors);
      break;
    case pb::Data::kIdx:
      CheckIdx(data.idx(), directory, errors);
      break;
    case pb::Data::kText:
      CheckText(data.text(), directory, errors);
      break;
    case pb::Data::kCustom:
      if (data.custom().name().empty()) {
        errors.Add("data.custom.name",
                   "is missing; name the data source the program registered "
                   "(include/gpipe/data_source.h)");
      }
      break;
    case pb::Data::SOURCE_NOT_SET:
      errors.Add("data",
                 "has no source; set synthetic {}, npy { inputs: ... targets: ... }, idx { "
                 "train_images: ... train_labels: ... } or text { paths: ... }");
      break;
  }
  CheckInputMatchesData(plan, errors);
}

void CheckRuntime(const pb::Plan& plan, PlanErrors& errors) {
  const pb::Runtime& runtime = plan.runtime();
  if (runtime.threads() < 1) {
    errors.Add("runtime.threads", absl::StrCat("is ", runtime.threads(),
                                               "; use at least 1 compute thread per process"));
  }
  if (runtime.log_every() < 0) {
    errors.Add("runtime.log_every",
               absl::StrCat("is ", runtime.log_every(), "; use 0 (never) or a step interval >= 1"));
  }
  if (runtime.transport() == pb::NCCL && runtime.device() != pb::CUDA) {
    errors.Add("runtime.transport",
               absl::StrCat("is NCCL, which moves GPU tensors, but runtime.device is ",
                            pb::Device_Name(runtime.device()),
                            "; use transport: MPI (the default) or device: CUDA"));
  }
  if (runtime.gradient_bucket_bytes() < 1) {
    errors.Add("runtime.gradient_bucket_bytes",
               absl::StrCat("is ", runtime.gradient_bucket_bytes(), "; it must be >= 1"));
  }
  if (runtime.memory_limit_bytes() < 0) {
    errors.Add("runtime.memory_limit_bytes", absl::StrCat("is ", runtime.memory_limit_bytes(),
                                                          "; use 0 (no limit) or a byte budget"));
  }
  if (runtime.trace_steps() < 0) {
    errors.Add("runtime.trace_steps",
               absl::StrCat("is ", runtime.trace_steps(), "; use 0 (every step) or a step count"));
  }
  const pb::Timeouts& timeouts = runtime.timeouts();
  for (const auto& [name, seconds] :
       {std::pair<const char*, double>{"wait_seconds", timeouts.wait_seconds()},
        std::pair<const char*, double>{"startup_seconds", timeouts.startup_seconds()}}) {
    if (!Positive(seconds)) {
      errors.Add(
          absl::StrCat("runtime.timeouts.", name),
          absl::StrCat("is ", Show(seconds), "; every wait needs a finite deadline > 0 seconds"));
    }
  }
  if (runtime.device() == pb::SIM) CheckSim(plan, errors);
}

}  // namespace gpipe
