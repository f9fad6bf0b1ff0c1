#include "tests/exec/pipeline_harness.h"

#include <cmath>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/core/check.h"
#include "runtime/core/status_macros.h"
#include "runtime/data/batch_sampler.h"
#include "runtime/data/dataset.h"
#include "runtime/data/open_dataset.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/exec/stage_chunks.h"
#include "runtime/exec/stage_executor.h"
#include "runtime/plan/boundary_dtype.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_loader.h"
#include "runtime/plan/plan_program.h"
#include "runtime/schedule/build_program.h"
#include "runtime/schedule/rank_layout.h"
#include "tests/exec/issue_order_channel.h"

namespace gpipe::testing {

extern const char kPlan[];
const char kPlan[] = R"pb(
  name: "exec-test"
  model {
    input { shape: [ 6 ] }
    layers {
      name: "fc1"
      linear { out_features: 16 }
    }
    layers {
      name: "act1"
      gelu {}
    }
    layers {
      name: "drop1"
      dropout { p: 0.2 }
    }
    layers {
      name: "fc2"
      linear { out_features: 12 }
    }
    layers {
      name: "norm2"
      layer_norm {}
    }
    layers {
      name: "act2"
      tanh {}
    }
    layers {
      name: "fc3"
      linear { out_features: 4 }
    }
    loss { softmax_cross_entropy {} }
  }
  pipeline { stages: 1 micro_batches: 4 }
  training {
    global_batch: 16
    steps: 3
    seed: 11
    optimizer { sgd { lr: 0.1 momentum: 0.5 } }
  }
  data {
    synthetic { num_samples: 40 }
    shuffle: true
  }
)pb";

namespace {

// Decides apply/skip once all stages reported a step, like rank 0 does.
class SharedGate {
 public:
  explicit SharedGate(int stages) : stages_(stages) {}
  absl::StatusOr<bool> Synchronize(const pb::StepReport& report) {
    absl::MutexLock lock(&mu_);
    const int64_t step = report.step();
    Round& round = rounds_[step];
    round.reports.push_back(report);
    if (report.non_finite()) round.apply = false;
    auto all_in = [&round, this]() { return static_cast<int>(round.reports.size()) == stages_; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&all_in), absl::Seconds(30))) {
      return absl::DeadlineExceededError("not every stage reached the gradient-sync barrier");
    }
    return round.apply;
  }
  std::vector<pb::StepReport> reports(int64_t step) {
    absl::MutexLock lock(&mu_);
    return rounds_[step].reports;
  }

 private:
  struct Round {
    std::vector<pb::StepReport> reports;
    bool apply = true;
  };
  const int stages_;
  absl::Mutex mu_;
  std::map<int64_t, Round> rounds_;
};

class GateForStage final : public GradientSyncGate {
 public:
  explicit GateForStage(SharedGate& shared) : shared_(shared) {}
  absl::StatusOr<pb::StepDecision> Synchronize(const pb::StepReport& report) override {
    ASSIGN_OR_RETURN(const bool apply, shared_.Synchronize(report));
    pb::StepDecision decision;
    decision.set_step(report.step());
    decision.set_apply(apply);
    return decision;
  }

 private:
  SharedGate& shared_;
};

// Wraps a dataset so every input is NaN.
class PoisonedDataset final : public Dataset {
 public:
  explicit PoisonedDataset(std::unique_ptr<Dataset> inner) : inner_(std::move(inner)) {}
  int64_t size() const override { return inner_->size(); }
  const Shape& input_shape() const override { return inner_->input_shape(); }
  DType input_dtype() const override { return inner_->input_dtype(); }
  const Shape& target_shape() const override { return inner_->target_shape(); }
  DType target_dtype() const override { return inner_->target_dtype(); }
  absl::Status GatherInputs(std::span<const int64_t> indices, Tensor& out) const override {
    for (float& v : out.f32_span()) v = std::nanf("");
    return absl::OkStatus();
  }
  absl::Status GatherTargets(std::span<const int64_t> indices, Tensor& out) const override {
    return inner_->GatherTargets(indices, out);
  }

 private:
  std::unique_ptr<Dataset> inner_;
};

// Wraps a dataset so the second target of every gather is `bad_class_id`.
class BadTargetDataset final : public Dataset {
 public:
  BadTargetDataset(std::unique_ptr<Dataset> inner, int64_t bad_class_id)
      : inner_(std::move(inner)), bad_class_id_(bad_class_id) {}
  int64_t size() const override { return inner_->size(); }
  const Shape& input_shape() const override { return inner_->input_shape(); }
  DType input_dtype() const override { return inner_->input_dtype(); }
  const Shape& target_shape() const override { return inner_->target_shape(); }
  DType target_dtype() const override { return inner_->target_dtype(); }
  absl::Status GatherInputs(std::span<const int64_t> indices, Tensor& out) const override {
    return inner_->GatherInputs(indices, out);
  }
  absl::Status GatherTargets(std::span<const int64_t> indices, Tensor& out) const override {
    RETURN_IF_ERROR(inner_->GatherTargets(indices, out));
    if (out.num_elements() > 1) out.data<int64_t>()[1] = bad_class_id_;
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<Dataset> inner_;
  int64_t bad_class_id_;
};

}  // namespace

PipelineRun RunPipeline(const RunOptions& options) {
  std::vector<std::string> overrides = options.overrides;
  overrides.push_back(absl::StrCat("pipeline { stages: ", options.stages, " }"));
  auto loaded = ParsePlanText(options.plan != nullptr ? options.plan : kPlan, "exec-test.pbtxt",
                              ".", overrides);
  GPIPE_CHECK(loaded.ok()) << loaded.status();
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  auto analyzed = AnalyzePlan(*loaded, registry);
  GPIPE_CHECK(analyzed.ok()) << analyzed.status();
  const pb::Plan& plan = analyzed->plan;
  const int stages = options.stages;
  const int chunks = plan.pipeline().virtual_stages();
  const schedule::Topology topology = schedule::TopologyOf(plan.pipeline());
  const schedule::RankLayout layout = *schedule::RankLayout::Create(1, stages);
  auto program = TrainingProgramOf(*analyzed);
  GPIPE_CHECK(program.ok()) << program.status();
  if (options.edit_program) options.edit_program(*program);
  auto eval_program = EvalProgramOf(*analyzed);
  GPIPE_CHECK(eval_program.ok()) << eval_program.status();
  const std::vector<pb::StageSpec> parts = ToStageSpecs(*analyzed);

  // Devices outlive the hub: tensors left in it (after a failure) return their bytes to them.
  std::vector<std::unique_ptr<CpuDevice>> devices;
  for (int s = 0; s < stages; ++s) devices.push_back(std::make_unique<CpuDevice>());
  LoopbackHub hub;
  IssueOrderHub ordered_hub;
  SharedGate shared_gate(stages);
  PipelineRun run;
  run.statuses.resize(stages);
  run.peak_activation.resize(stages);
  run.peak_boundary.resize(stages);
  run.peak_boundary_grad.resize(stages);
  run.end_boundary.resize(stages);
  run.end_boundary_grad.resize(stages);
  run.end_transient.resize(stages);
  absl::Mutex weights_mu;

  auto stage_main = [&](int s) -> absl::Status {
    CpuDevice& device = *devices[s];
    ASSIGN_OR_RETURN(
        StageChunks params,
        StageChunks::Create(device, plan, StageChunks::SpecsForStage(parts, s, topology), registry,
                            /*ties=*/{}, options.adapter));
    DataRequirements req{
        .input_shape = analyzed->layers.front().input_shape,
        .input_dtype = plan.model().input().type() == pb::INT64 ? DType::kI64 : DType::kF32,
        .target_shape = analyzed->target_shape,
        .target_dtype = analyzed->target_dtype,
        .num_classes = analyzed->num_classes,
        .seed = plan.training().seed()};
    ASSIGN_OR_RETURN(std::unique_ptr<Dataset> dataset, OpenDataset(plan.data(), req));
    if (options.poison_input) dataset = std::make_unique<PoisonedDataset>(std::move(dataset));
    if (options.bad_class_id.has_value()) {
      dataset = std::make_unique<BadTargetDataset>(std::move(dataset), *options.bad_class_id);
    }
    LoopbackChannel loopback(hub, s, options.fault);
    IssueOrderChannel ordered(ordered_hub, s);
    DataChannel& channel = options.match_in_issue_order ? static_cast<DataChannel&>(ordered)
                                                        : static_cast<DataChannel&>(loopback);
    GateForStage gate(shared_gate);
    ExecutorConfig config{.rank = s,
                          .stage = s,
                          .num_stages = stages,
                          .chunks = chunks,
                          .micro_batches = plan.pipeline().micro_batches(),
                          .global_batch = plan.training().global_batch(),
                          .remat = plan.pipeline().remat(),
                          .offload = plan.pipeline().offload(),
                          .seed = plan.training().seed(),
                          .placement = plan.pipeline().placement(),
                          .replica_group = {s},
                          .wait_timeout = absl::Seconds(options.wait_seconds),
                          .boundary_dtype = BoundaryDType(plan.training())};
    for (int chunk = 0; chunk < chunks; ++chunk) {
      config.neighbours.push_back({.prev = layout.NeighbourRank(s, topology, chunk, false),
                                   .next = layout.NeighbourRank(s, topology, chunk, true)});
    }
    config.skips = layout.SkipLinks(s, topology, program->skips);
    config.capture_graphs = plan.runtime().cuda().graphs();
    StageExecutor executor(config, program->stage_programs[s],
                           ExecutorResources{device, params.refs(), dataset.get(), channel, gate});
    BatchSampler sampler(dataset->size(), plan.training().global_batch(), plan.data().shuffle(),
                         plan.training().seed());
    {
      absl::MutexLock lock(&weights_mu);
      ASSIGN_OR_RETURN(const std::vector<NamedTensorData> initial, params.Export());
      for (const NamedTensorData& t : initial) run.initial_weights[t.name] = t.values;
    }
    // One EVAL step (forward only) on step 0's samples; one chunk per stage (EVAL does not
    // interleave).
    auto evaluate = [&]() -> absl::Status {
      GPIPE_CHECK(chunks == 1) << "evaluation runs without interleaving";
      StageExecutor evaluator(
          config, eval_program->stage_programs[s],
          ExecutorResources{device, params.refs(), dataset.get(), channel, gate});
      pb::StepCommand command;
      command.set_step(options.eval_before ? -1 : plan.training().steps());
      for (int64_t i : sampler.IndicesForStep(0)) command.add_sample_indices(i);
      ASSIGN_OR_RETURN(const pb::StepReport report, evaluator.RunStep(command));
      if (report.eval_samples() > 0) {
        run.eval_loss = report.eval_loss_sum() / static_cast<double>(report.eval_samples());
      }
      return absl::OkStatus();
    };
    if (options.eval_before) RETURN_IF_ERROR(evaluate());
    pb::StepReport last;
    for (int64_t step = 0; step < plan.training().steps(); ++step) {
      pb::StepCommand command;
      command.set_step(step);
      command.set_lr(params.optimizer(0).base_lr());
      for (int64_t i : sampler.IndicesForStep(step)) command.add_sample_indices(i);
      ASSIGN_OR_RETURN(last, executor.RunStep(command));
    }
    // Peaks of the last step (each step resets them).
    run.peak_activation[s] = device.memory().peak(MemoryKind::kActivation);
    run.peak_boundary[s] = device.memory().peak(MemoryKind::kBoundary);
    run.peak_boundary_grad[s] = device.memory().peak(MemoryKind::kBoundaryGrad);
    if (options.eval_after) RETURN_IF_ERROR(evaluate());
    ASSIGN_OR_RETURN(const std::vector<NamedTensorData> final_weights, params.Export());
    absl::MutexLock lock(&weights_mu);
    for (const NamedTensorData& t : final_weights) run.weights[t.name] = t.values;
    run.end_boundary[s] = device.memory().current(MemoryKind::kBoundary);
    run.end_boundary_grad[s] = device.memory().current(MemoryKind::kBoundaryGrad);
    run.end_transient[s] = device.memory().current(MemoryKind::kActivation) +
                           device.memory().current(MemoryKind::kBoundary) +
                           device.memory().current(MemoryKind::kBoundaryGrad);
    run.last_reports.push_back(last);
    return absl::OkStatus();
  };

  std::vector<std::thread> threads;
  for (int s = 0; s < stages; ++s) {
    threads.emplace_back([&, s] { run.statuses[s] = stage_main(s); });
  }
  for (std::thread& t : threads) t.join();
  return run;
}

void ExpectSucceeded(const PipelineRun& run) {
  for (const absl::Status& s : run.statuses) ASSERT_TRUE(s.ok()) << s;
}

}  // namespace gpipe::testing
