// StageExecutor in one process: K stages on K threads exchanging tensors through a loopback
// channel. Pins the executor's own behaviour (equivalence across K and remat, gradient
// accumulation, memory held per policy, error context, skipped steps) without MPI.
#include "runtime/exec/stage_executor.h"

#include <cmath>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_loader.h"
#include "runtime/schedule/program.h"
#include "tests/exec/loopback_channel.h"

namespace gpipe {
namespace {

constexpr char kPlan[] = R"pb(
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
  absl::StatusOr<bool> Synchronize(const pb::StepReport& report) override {
    return shared_.Synchronize(report);
  }

 private:
  SharedGate& shared_;
};

struct PipelineRun {
  std::map<std::string, std::vector<float>> weights;          // after training
  std::map<std::string, std::vector<float>> initial_weights;  // before the first step
  std::vector<absl::Status> statuses;                         // per stage
  std::vector<int64_t> peak_activation;                       // per stage, bytes (kActivation)
  std::vector<int64_t> peak_boundary;                         // per stage, bytes (kBoundary)
  std::vector<int64_t> end_transient;  // per stage: activation + boundary bytes after the run
  std::vector<pb::StepReport> last_reports;
};

struct RunOptions {
  int stages = 1;
  std::vector<std::string> overrides;
  testing::LoopbackChannel::FaultHook fault;
  bool poison_input = false;  // make sample inputs non-finite on the first stage
  double wait_seconds = 20;
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

PipelineRun RunPipeline(const RunOptions& options) {
  std::vector<std::string> overrides = options.overrides;
  overrides.push_back(absl::StrCat("pipeline { stages: ", options.stages, " }"));
  auto loaded = ParsePlanText(kPlan, "exec-test.pbtxt", ".", overrides);
  GPIPE_CHECK(loaded.ok()) << loaded.status();
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  auto analyzed = AnalyzePlan(*loaded, registry);
  GPIPE_CHECK(analyzed.ok()) << analyzed.status();
  const pb::Plan& plan = analyzed->plan;
  const int stages = options.stages;
  auto program =
      schedule::BuildProgram(plan.pipeline().schedule(), stages, plan.pipeline().micro_batches());
  GPIPE_CHECK(program.ok());

  // Devices outlive the hub: tensors left in it (after a failure) return their bytes to them.
  std::vector<std::unique_ptr<CpuDevice>> devices;
  for (int s = 0; s < stages; ++s) devices.push_back(std::make_unique<CpuDevice>());
  testing::LoopbackHub hub;
  SharedGate shared_gate(stages);
  PipelineRun run;
  run.statuses.resize(stages);
  run.peak_activation.resize(stages);
  run.peak_boundary.resize(stages);
  run.end_transient.resize(stages);
  absl::Mutex weights_mu;

  auto stage_main = [&](int s) -> absl::Status {
    CpuDevice& device = *devices[s];
    const StageInfo& info = analyzed->stages[s];
    ASSIGN_OR_RETURN(StageModel model,
                     StageModel::Create(plan.model(), info.first_layer, info.end_layer,
                                        info.input_shape, registry));
    ASSIGN_OR_RETURN(ParameterStore params,
                     ParameterStore::Create(device, model, plan.training().seed()));
    ASSIGN_OR_RETURN(auto optimizer, CreateOptimizer(plan.training().optimizer()));
    DataRequirements req{.input_shape = analyzed->layers.front().input_shape,
                         .target_shape = analyzed->target_shape,
                         .target_dtype = analyzed->target_dtype,
                         .num_classes = analyzed->num_classes,
                         .seed = plan.training().seed()};
    ASSIGN_OR_RETURN(std::unique_ptr<Dataset> dataset, OpenDataset(plan.data(), req));
    if (options.poison_input) dataset = std::make_unique<PoisonedDataset>(std::move(dataset));
    testing::LoopbackChannel channel(hub, s, options.fault);
    GateForStage gate(shared_gate);
    ExecutorConfig config{.rank = s,
                          .stage = s,
                          .num_stages = stages,
                          .micro_batches = plan.pipeline().micro_batches(),
                          .global_batch = plan.training().global_batch(),
                          .remat = plan.pipeline().remat(),
                          .seed = plan.training().seed(),
                          .prev_rank = s > 0 ? s - 1 : -1,
                          .next_rank = s < stages - 1 ? s + 1 : -1,
                          .replica_group = {s},
                          .wait_timeout = absl::Seconds(options.wait_seconds)};
    StageExecutor executor(
        config, program->stage_programs[s],
        ExecutorResources{device, model, params, *optimizer, dataset.get(), channel, gate});
    BatchSampler sampler(dataset->size(), plan.training().global_batch(), plan.data().shuffle(),
                         plan.training().seed());
    {
      absl::MutexLock lock(&weights_mu);
      for (const NamedTensorData& t : params.Export()) run.initial_weights[t.name] = t.values;
    }
    pb::StepReport last;
    for (int64_t step = 0; step < plan.training().steps(); ++step) {
      pb::StepCommand command;
      command.set_step(step);
      command.set_lr(optimizer->base_lr());
      for (int64_t i : sampler.IndicesForStep(step)) command.add_sample_indices(i);
      ASSIGN_OR_RETURN(last, executor.RunStep(command));
    }
    absl::MutexLock lock(&weights_mu);
    for (const NamedTensorData& t : params.Export()) run.weights[t.name] = t.values;
    run.peak_activation[s] = device.memory().peak(MemoryKind::kActivation);
    run.peak_boundary[s] = device.memory().peak(MemoryKind::kBoundary);
    run.end_transient[s] = device.memory().current(MemoryKind::kActivation) +
                           device.memory().current(MemoryKind::kBoundary);
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

TEST(StageExecutorTest, StageCountsGiveBitIdenticalWeights) {
  const PipelineRun one = RunPipeline({.stages = 1});
  ExpectSucceeded(one);
  ASSERT_FALSE(one.weights.empty());
  for (int stages : {2, 3, 5}) {
    const PipelineRun many = RunPipeline({.stages = stages});
    for (const absl::Status& s : many.statuses) ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(many.weights.size(), one.weights.size());
    for (const auto& [name, values] : one.weights) {
      EXPECT_EQ(many.weights.at(name), values) << name << " with " << stages << " stages";
    }
  }
}

TEST(StageExecutorTest, RematPoliciesGiveBitIdenticalWeights) {
  const PipelineRun never = RunPipeline({.stages = 2, .overrides = {"pipeline { remat: NEVER }"}});
  ExpectSucceeded(never);
  EXPECT_NE(never.weights, never.initial_weights);
  for (const char* policy : {"EXCEPT_LAST", "ALWAYS"}) {
    const PipelineRun other =
        RunPipeline({.stages = 2, .overrides = {absl::StrCat("pipeline { remat: ", policy, " }")}});
    ExpectSucceeded(other);
    EXPECT_EQ(other.weights, never.weights) << policy;
  }
}

TEST(StageExecutorTest, RematerializationBoundsActivationMemory) {
  // 8 micro-batches: without remat a stage holds all 8 micro-batches' activations; with ALWAYS
  // (and EXCEPT_LAST, whose one kept micro-batch is the last) about one micro-batch's. Every
  // policy keeps each micro-batch's stage input (boundary memory), and nothing outlives a step.
  const std::string m8 = "pipeline { micro_batches: 8 } training { global_batch: 32 }";
  std::map<std::string, PipelineRun> runs;
  for (const char* policy : {"NEVER", "EXCEPT_LAST", "ALWAYS"}) {
    runs[policy] = RunPipeline(
        {.stages = 2, .overrides = {m8, absl::StrCat("pipeline { remat: ", policy, " }")}});
    ExpectSucceeded(runs[policy]);
    for (int s = 0; s < 2; ++s) {
      // Nothing of a step outlives it.
      EXPECT_EQ(runs[policy].end_transient[s], 0) << policy << " stage " << s;
    }
  }
  for (int s = 0; s < 2; ++s) {
    EXPECT_GT(runs["NEVER"].peak_activation[s], runs["ALWAYS"].peak_activation[s]) << s;
    EXPECT_GT(runs["NEVER"].peak_activation[s], runs["EXCEPT_LAST"].peak_activation[s]) << s;
  }
  // On one stage holding all 7 layers the saved activations dominate: 8 micro-batches' worth
  // against one.
  const PipelineRun never =
      RunPipeline({.stages = 1, .overrides = {m8, "pipeline { remat: NEVER }"}});
  const PipelineRun always =
      RunPipeline({.stages = 1, .overrides = {m8, "pipeline { remat: ALWAYS }"}});
  ExpectSucceeded(never);
  ExpectSucceeded(always);
  EXPECT_GT(never.peak_activation[0], 4 * always.peak_activation[0])
      << never.peak_activation[0] << " vs " << always.peak_activation[0];
  // Stage 0 keeps 8 micro-batches x 4 samples x 6 input floats (plus gradient receives posted
  // ahead), the same whatever the policy.
  for (const char* policy : {"EXCEPT_LAST", "ALWAYS"}) {
    EXPECT_EQ(runs[policy].peak_boundary[0], runs["NEVER"].peak_boundary[0]) << policy;
  }
  EXPECT_GE(runs["NEVER"].peak_boundary[0], 8 * 4 * 6 * 4);
}

TEST(StageExecutorTest, ReportsCarryLossTimingAndMemory) {
  const PipelineRun run = RunPipeline({.stages = 3});
  ASSERT_EQ(run.last_reports.size(), 3u);
  for (const pb::StepReport& r : run.last_reports) {
    EXPECT_EQ(r.step(), 2);
    EXPECT_FALSE(r.non_finite());
    EXPECT_GT(r.step_ms(), 0.0);
    EXPECT_GE(r.step_ms(), r.busy_ms());
    EXPECT_GT(r.peak_bytes(), 0);
    EXPECT_EQ(r.has_loss(), r.stage() == 2);
    if (r.stage() == 2) {
      EXPECT_GT(r.loss(), 0.0);
      EXPECT_LT(r.loss(), 3.0);
      EXPECT_GE(r.correct(), 0);
      EXPECT_LE(r.correct(), 16);
    }
  }
}

TEST(StageExecutorTest, TransferFailureNamesRankStageMicroBatchAndInstruction) {
  auto fault = [](int rank, int peer, const TransferKey& key) -> absl::Status {
    if (rank == 1 && key.kind == TransferKind::kActivation && key.micro_batch == 2) {
      return absl::DataLossError("injected");
    }
    return absl::OkStatus();
  };
  const PipelineRun run = RunPipeline({.stages = 2, .fault = fault, .wait_seconds = 1});
  ASSERT_FALSE(run.statuses[1].ok());
  EXPECT_TRUE(absl::StrContains(run.statuses[1].message(),
                                "rank 1, stage 1, step 0: instruction RecvActivation(mb=2)"))
      << run.statuses[1];
  EXPECT_TRUE(absl::StrContains(run.statuses[1].message(), "injected")) << run.statuses[1];
  // Stage 0 then waits for gradients that never come and gives up at its deadline.
  EXPECT_EQ(run.statuses[0].code(), absl::StatusCode::kDeadlineExceeded) << run.statuses[0];
}

TEST(StageExecutorTest, NonFiniteInputsSkipTheUpdateOnEveryStage) {
  const PipelineRun clean = RunPipeline({.stages = 2, .overrides = {"training { steps: 1 }"}});
  ExpectSucceeded(clean);
  const PipelineRun poisoned =
      RunPipeline({.stages = 2, .overrides = {"training { steps: 1 }"}, .poison_input = true});
  for (const absl::Status& s : poisoned.statuses) ASSERT_TRUE(s.ok()) << s;
  for (const pb::StepReport& r : poisoned.last_reports) EXPECT_TRUE(r.non_finite());
  // Skipped: the weights stay at their initial values, which training would have changed.
  EXPECT_EQ(poisoned.weights, poisoned.initial_weights);
  EXPECT_EQ(clean.initial_weights, poisoned.initial_weights);
  EXPECT_NE(clean.weights, clean.initial_weights);
}

}  // namespace
}  // namespace gpipe
