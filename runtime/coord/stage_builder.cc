#include "runtime/coord/stage_builder.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/ckpt/hf_checkpoint.h"
#include "runtime/coord/init_from.h"
#include "runtime/coord/setup_builder.h"
#include "runtime/core/status_macros.h"
#include "runtime/data/open_dataset.h"
#include "runtime/exec/gradient_norm_terms.h"
#include "runtime/plan/boundary_dtype.h"
#include "runtime/plan/plan_program.h"
#include "runtime/schedule/program.h"
#include "runtime/schedule/rank_layout.h"

namespace gpipe {
namespace {

Shape ToShape(const google::protobuf::RepeatedField<int64_t>& dims) {
  return Shape(std::vector<int64_t>(dims.begin(), dims.end()));
}

DataRequirements RequirementsOf(const pb::Setup& setup) {
  const pb::Plan& plan = setup.plan();
  DataRequirements req;
  req.input_shape = ToShape(plan.model().input().shape());
  req.target_shape = ToShape(setup.target_shape());
  req.target_dtype = setup.class_targets() ? DType::kI64 : DType::kF32;
  req.num_classes = setup.num_classes();
  req.seed = plan.training().seed();
  req.input_dtype = plan.model().input().type() == pb::INT64 ? DType::kI64 : DType::kF32;
  return req;
}

// The executors' configuration: the stage's place in the pipeline and in the rank layout.
absl::StatusOr<ExecutorConfig> ConfigFor(const pb::Setup& setup, const schedule::RankLayout& layout,
                                         int rank, absl::Duration timeout) {
  const pb::Plan& plan = setup.plan();
  const int stage = layout.StageOf(rank);
  const int chunks = plan.pipeline().virtual_stages();
  ExecutorConfig config;
  config.rank = rank;
  config.stage = stage;
  config.num_stages = plan.pipeline().stages();
  config.chunks = chunks;
  config.micro_batches = plan.pipeline().micro_batches();
  config.global_batch = plan.training().global_batch();
  config.replica = layout.ReplicaOf(rank);
  config.replicas = layout.replicas();
  config.shard_optimizer_state = plan.training().shard_optimizer_state() && config.replicas > 1;
  config.remat = plan.pipeline().remat();
  config.offload = plan.pipeline().offload();
  config.seed = plan.training().seed();
  config.placement = plan.pipeline().placement();
  const schedule::Topology topology = config.topology();
  for (int chunk = 0; chunk < chunks; ++chunk) {
    config.neighbours.push_back({.prev = layout.NeighbourRank(rank, topology, chunk, false),
                                 .next = layout.NeighbourRank(rank, topology, chunk, true)});
  }
  ASSIGN_OR_RETURN(const std::vector<schedule::SkipRoute> routes,
                   SkipRoutesOf(plan.model(), std::vector<pb::StageSpec>(setup.stages().begin(),
                                                                         setup.stages().end())));
  config.skips = layout.SkipLinks(rank, topology, routes);
  config.replica_group = layout.ReplicaGroup(stage);
  config.wait_timeout = timeout;
  config.boundary_dtype = BoundaryDType(plan.training());
  config.capture_graphs = plan.runtime().cuda().graphs() && plan.runtime().device() != pb::SIM;
  return config;
}

// The training and evaluation splits, on the first and last stages.
absl::Status OpenDatasets(const StageInputs& in, int stages, RankStage& stage) {
  const pb::Plan& plan = in.setup.plan();
  if (stage.stage == 0 || stage.stage == stages - 1) {
    DataRequirements requirements = RequirementsOf(in.setup);
    requirements.keep_inputs = stage.stage == 0;
    requirements.keep_targets = stage.stage == stages - 1;
    ASSIGN_OR_RETURN(stage.dataset,
                     OpenDataset(plan.data(), requirements, DataSplit::kTrain, in.data_sources));
    if (in.setup.has_eval_program()) {
      ASSIGN_OR_RETURN(stage.eval_dataset,
                       OpenDataset(plan.data(), requirements, DataSplit::kEval, in.data_sources));
    }
  }
  stage.dataset = stage.backend->AdaptDataset(std::move(stage.dataset));
  stage.eval_dataset = stage.backend->AdaptDataset(std::move(stage.eval_dataset));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReceivedSetup> ReceiveSetup(ControlChannel& control, const WorkerOptions& options,
                                           const LayerRegistry& layers,
                                           const DataSourceRegistry* data_sources) {
  const absl::Time deadline = absl::Now() + options.startup_timeout;
  ReceivedSetup received;
  if (control.rank() != 0) {
    RETURN_IF_ERROR(control.Recv(0, kControlTagSetup, received.setup, deadline));
    return received;
  }
  auto job = ResolveJob(options, control.size(), layers, data_sources);
  std::vector<pb::Setup> setups(control.size());
  if (job.ok()) {
    setups = job->setups;
    received.prediction = job->prediction;
    received.files = job->files;
    received.checkpoint_lock = std::move(job->checkpoint_lock);
    if (!options.trace.empty()) {
      for (pb::Setup& s : setups) s.mutable_plan()->mutable_runtime()->set_trace(options.trace);
    }
    TraceSession::RemoveStaleParts(setups[0].plan().runtime().trace(), control.size());
  } else {
    for (pb::Setup& s : setups) s.set_error(std::string(job.status().message()));
  }
  for (int r = 1; r < control.size(); ++r) {
    RETURN_IF_ERROR(control.Send(r, kControlTagSetup, setups[r], deadline));
  }
  received.setup = std::move(setups[0]);
  return received;
}

absl::Status BuildStage(const StageInputs& in, RankStage& stage) {
  const pb::Setup& setup = in.setup;
  const pb::Plan& plan = setup.plan();
  const int rank = in.control.rank();
  ASSIGN_OR_RETURN(const schedule::RankLayout layout,
                   schedule::RankLayout::FromProto(setup.layout()));
  const int stages = plan.pipeline().stages();
  if (layout.world_size() != in.control.size() || layout.stages() != stages ||
      layout.StageOf(rank) != setup.stage()) {
    return absl::InternalError(
        absl::StrCat("rank ", rank, " received an inconsistent rank layout (", layout.replicas(),
                     " x ", layout.stages(), " for ", in.control.size(), " ranks, stage ",
                     setup.stage(), "); a gpipe bug, please report it"));
  }
  stage.stage = layout.StageOf(rank);
  stage.replica = layout.ReplicaOf(rank);
  const int chunks = plan.pipeline().virtual_stages();
  stage.timeout = absl::Seconds(plan.runtime().timeouts().wait_seconds());

  ASSIGN_OR_RETURN(
      stage.backend,
      in.backends.Create(plan.runtime(),
                         BackendContext{.world = in.comm,
                                        .logger = &in.logger,
                                        .cuda_visible_devices = in.options.cuda_visible_devices}));
  Device& device = stage.backend->device();
  RETURN_IF_ERROR(stage.backend->CheckSetup(setup));
  const std::vector<ChunkSpec> specs =
      StageChunks::SpecsForStage({setup.stages().begin(), setup.stages().end()}, stage.stage,
                                 schedule::TopologyOf(plan.pipeline()));
  if (setup.stages_size() != stages * chunks || static_cast<int>(specs.size()) != chunks) {
    return absl::InternalError(absl::StrCat("the stage table has ", setup.stages_size(),
                                            " parts, not ", stages, " stages x ", chunks,
                                            " chunks"));
  }
  const std::vector<pb::TieGroup> ties(setup.ties().begin(), setup.ties().end());
  ASSIGN_OR_RETURN(
      StageChunks parts,
      StageChunks::Create(device, plan, specs, in.layers.ForDevice(plan.runtime().device()), ties,
                          stage.backend->ChunkAdapterFor(plan), stage.replica));
  stage.chunks = std::make_unique<StageChunks>(std::move(parts));
  if (setup.has_init_from()) {
    ASSIGN_OR_RETURN(const HfCheckpoint checkpoint, HfCheckpoint::Open(setup.init_from()));
    ASSIGN_OR_RETURN(std::vector<NamedTensorData> initial,
                     ReadInitialTensors(checkpoint, stage.chunks->StateNames(0), ties));
    RETURN_IF_ERROR(WithContext(stage.chunks->Import(initial),
                                absl::StrCat("--init-from ", setup.init_from())));
  }

  RETURN_IF_ERROR(OpenDatasets(in, stages, stage));
  stage.checkpoints =
      std::make_unique<CheckpointSession>(in.control, setup, stage.timeout, in.logger);
  if (setup.has_resume()) {
    RETURN_IF_ERROR(stage.checkpoints->Restore(
        *stage.chunks, stage.dataset != nullptr ? stage.dataset->size() : 0));
    stage.steps_done = setup.resume().manifest().step();
  }

  ASSIGN_OR_RETURN(
      stage.channel,
      stage.backend->CreateChannel(
          plan, in.comm, [&control = in.control] { return control.PollAbort(); }, stage.timeout));
  ASSIGN_OR_RETURN(schedule::StageProgram program, schedule::FromProto(setup.program()));

  ASSIGN_OR_RETURN(const ExecutorConfig config, ConfigFor(setup, layout, rank, stage.timeout));
  stage.gate = std::make_unique<CoordinatorGate>(
      in.control, stage.timeout, in.options.stop_requested, plan.training().clip_grad_norm(),
      config.shard_optimizer_state);
  TraceRecorder* recorder = in.trace != nullptr ? in.trace->recorder() : nullptr;
  ExecutorResources resources{device,         stage.chunks->refs(), stage.dataset.get(),
                              *stage.channel, *stage.gate,          recorder};
  // The stage's replica group (with its gradient buckets) and tie groups, made here, once.
  ASSIGN_OR_RETURN(
      StageReduceGroups reduce_groups,
      StageReduceGroups::Make(*stage.channel, *stage.chunks, rank, config.replica_group, ties,
                              plan.runtime().gradient_bucket_bytes(), absl::Now() + stage.timeout));
  stage.reduce_groups = std::make_unique<StageReduceGroups>(std::move(reduce_groups));
  stage.reduce_groups->AttachTo(resources);
  if (plan.training().clip_grad_norm() > 0) {
    resources.gradient_norm_terms = GradientNormTermsFor(resources.chunks, ties);
  }
  stage.executor = std::make_unique<StageExecutor>(config, std::move(program), resources);
  // The forward-only program that evaluates the held-out split with the same parts.
  if (setup.has_eval_program()) {
    ASSIGN_OR_RETURN(schedule::StageProgram eval_program,
                     schedule::FromProto(setup.eval_program()));
    ExecutorResources eval_resources{device,         stage.chunks->refs(), stage.eval_dataset.get(),
                                     *stage.channel, *stage.gate,          recorder};
    // An evaluation after a sharded update reads the parameters the gather brings.
    eval_resources.parameter_gather = stage.reduce_groups->parameter_gather();
    stage.evaluator =
        std::make_unique<StageExecutor>(config, std::move(eval_program), eval_resources);
  }
  if (in.trace != nullptr) {
    RETURN_IF_ERROR(WithContext(in.trace->AlignClocks(in.control, absl::Now() + stage.timeout),
                                "aligning the ranks' clocks for the trace"));
  }
  return absl::OkStatus();
}

absl::Status SettleParameters(RankStage& stage) {
  ParameterGather* gather =
      stage.reduce_groups != nullptr ? stage.reduce_groups->parameter_gather() : nullptr;
  if (gather == nullptr) return absl::OkStatus();
  return gather->WaitAll(absl::Now() + stage.timeout);
}

}  // namespace gpipe
