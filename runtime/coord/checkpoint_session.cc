#include "runtime/coord/checkpoint_session.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/text_format.h"
#include "runtime/ckpt/checkpoint_layout.h"
#include "runtime/ckpt/checkpoint_manifest.h"
#include "runtime/ckpt/checkpoint_reader.h"
#include "runtime/ckpt/checkpoint_writer.h"
#include "runtime/ckpt/crc32.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// The optimizer steps every chunk of the stage has taken (they step together).
absl::StatusOr<int64_t> OptimizerSteps(const StageChunks& parts) {
  const int64_t steps = parts.optimizer(0).steps();
  for (int c = 1; c < parts.num_chunks(); ++c) {
    if (parts.optimizer(c).steps() != steps) {
      return absl::InternalError(absl::StrCat("chunk ", c, " took ", parts.optimizer(c).steps(),
                                              " optimizer steps, chunk 0 ", steps));
    }
  }
  return steps;
}

std::string RankName(int rank, int stage) {
  return absl::StrCat("rank ", rank, " (stage ", stage, ")");
}

}  // namespace

std::string CheckpointSession::CheckpointPath(int64_t step) const {
  return (std::filesystem::path(setup_.plan().checkpoint().dir()) / CheckpointStepName(step))
      .string();
}

absl::Status CheckpointSession::Prepare(int64_t step) {
  return PrepareCheckpoint(setup_.plan().checkpoint().dir(), step).status();
}

absl::Status CheckpointSession::Save(int64_t step, const StageChunks& parts,
                                     const CheckpointProgress& progress) {
  const absl::Time begin = absl::Now();
  const int stages = setup_.plan().pipeline().stages();
  pb::CheckpointShardReport report;
  report.set_rank(setup_.rank());
  report.set_stage(setup_.stage());
  // Replica r's stage s is rank r * stages + s (RankLayout). Replica 0's ranks write their stages'
  // values (the other replicas hold the same) and optimizer state; with the optimizer state
  // sharded, every other replica's rank writes its parts of the state too.
  const int replica = setup_.rank() / stages;
  const bool writes = replica == 0 || parts.sharded_optimizer_state();
  absl::Status written = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(const int64_t optimizer_steps, OptimizerSteps(parts));
    report.set_optimizer_steps(optimizer_steps);
    if (!writes) return absl::OkStatus();
    ASSIGN_OR_RETURN(StageChunks::SavedTensors saved, parts.SaveState(replica == 0));
    if (saved.tensors.empty() && replica > 0) return absl::OkStatus();  // owns no state yet
    ASSIGN_OR_RETURN(
        *report.mutable_shard(),
        WriteCheckpointShard(CheckpointPath(step), setup_.stage(), stages, saved.tensors, replica));
    for (pb::CheckpointTensor& entry : saved.entries) *report.add_tensors() = std::move(entry);
    return absl::OkStatus();
  }();
  if (!written.ok()) report.set_error(std::string(written.message()));
  ASSIGN_OR_RETURN(std::vector<std::string> gathered,
                   control_.GatherToRoot(report, absl::Now() + timeout_, kControlTagCheckpoint));
  absl::Status outcome;
  if (control_.rank() == 0) {
    outcome = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(const pb::CheckpointManifest manifest,
                       BuildManifest(step, progress, gathered));
      const std::string path = CheckpointPath(step);
      CheckpointRetention retention{.keep_last = setup_.plan().checkpoint().keep_last()};
      if (setup_.start_over()) retention.this_runs_steps = saved_steps_;
      ASSIGN_OR_RETURN(
          const std::vector<std::string> removed,
          CommitCheckpoint(setup_.plan().checkpoint().dir(), path, manifest, retention));
      saved_steps_.insert(step);
      int64_t bytes = 0;
      for (const pb::CheckpointShard& shard : manifest.shards()) bytes += shard.bytes();
      std::vector<std::string> removed_names;
      for (const std::string& r : removed) {
        removed_names.push_back(std::filesystem::path(r).filename().string());
      }
      logger_.Info(absl::StrFormat(
          "checkpoint: saved %s (step %d, %d tensors in %d shards, %.1f MB) in %.0f ms%s", path,
          step, manifest.tensors_size(), manifest.shards_size(), bytes / 1e6,
          absl::ToDoubleMilliseconds(absl::Now() - begin),
          removed.empty() ? "" : absl::StrCat("; removed ", absl::StrJoin(removed_names, ", "))));
      return absl::OkStatus();
    }();
    outcome = WithContext(outcome, absl::StrCat("saving checkpoint ", CheckpointPath(step)));
  }
  return Conclude(outcome, kControlTagCheckpoint, "saving the checkpoint");
}

absl::StatusOr<pb::CheckpointManifest> CheckpointSession::BuildManifest(
    int64_t step, const CheckpointProgress& progress, const std::vector<std::string>& gathered) {
  const pb::Plan& plan = setup_.plan();
  pb::CheckpointManifest manifest;
  manifest.set_format_version(kCheckpointFormatVersion);
  manifest.set_step(step);
  manifest.set_applied_steps(progress.applied_steps);
  manifest.set_skipped_in_a_row(progress.skipped_in_a_row);
  *manifest.mutable_plan() = plan;
  std::string plan_text;
  google::protobuf::TextFormat::PrintToString(plan, &plan_text);
  manifest.set_plan_crc32(Crc32(plan_text));
  manifest.set_dataset_size(progress.dataset_size);
  manifest.set_global_batch(plan.training().global_batch());
  manifest.set_seed(plan.training().seed());
  manifest.set_shuffle(plan.data().shuffle());
  if (setup_.has_data_fingerprint()) manifest.set_data_fingerprint(setup_.data_fingerprint());
  absl::flat_hash_map<std::string, int> seen;  // name -> index in manifest.tensors
  for (size_t r = 0; r < gathered.size(); ++r) {
    pb::CheckpointShardReport report;
    if (!report.ParseFromString(gathered[r])) {
      return absl::DataLossError(absl::StrCat("unreadable checkpoint report from rank ", r));
    }
    const std::string who = RankName(report.rank(), report.stage());
    if (report.has_error())
      return absl::FailedPreconditionError(absl::StrCat(who, ": ", report.error()));
    if (report.optimizer_steps() != progress.applied_steps) {
      return absl::InternalError(absl::StrCat(who, " took ", report.optimizer_steps(),
                                              " optimizer steps, rank 0 counted ",
                                              progress.applied_steps, " applied updates"));
    }
    if (!report.has_shard()) continue;
    const int shard = manifest.shards_size();
    *manifest.add_shards() = report.shard();
    for (const pb::CheckpointTensor& tensor : report.tensors()) {
      if (tensor.has_element_begin()) {  // a replica's part of a sharded optimizer state
        pb::CheckpointTensor* entry = manifest.add_tensors();
        *entry = tensor;
        entry->set_shard(shard);
        continue;
      }
      const auto [it, inserted] = seen.emplace(tensor.name(), manifest.tensors_size());
      if (!inserted) {
        // A tied parameter's members on several stages hold the same value: the first is kept.
        const pb::CheckpointTensor& first = manifest.tensors(it->second);
        if (first.shape_size() != tensor.shape_size() ||
            !std::equal(first.shape().begin(), first.shape().end(), tensor.shape().begin())) {
          return absl::InternalError(absl::StrCat("tensor '", tensor.name(),
                                                  "' is saved by two stages with other shapes"));
        }
        continue;
      }
      pb::CheckpointTensor* entry = manifest.add_tensors();
      *entry = tensor;
      entry->set_shard(shard);
    }
  }
  const int first_replica_shards = static_cast<int>(
      std::count_if(manifest.shards().begin(), manifest.shards().end(),
                    [](const pb::CheckpointShard& shard) { return shard.replica() == 0; }));
  if (first_replica_shards != plan.pipeline().stages()) {
    return absl::InternalError(absl::StrCat(first_replica_shards, " shards of replica 0 for ",
                                            plan.pipeline().stages(), " stages"));
  }
  return manifest;  // CommitCheckpoint validates it (the parts of each name cover it once)
}

absl::Status CheckpointSession::Restore(StageChunks& parts, int64_t dataset_size) {
  const pb::ResumeFrom& resume = setup_.resume();
  const pb::CheckpointManifest& manifest = resume.manifest();
  pb::ResumeReport report;
  report.set_rank(setup_.rank());
  const std::vector<std::string> names = parts.StateNames(manifest.applied_steps());
  absl::Status restored = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(const std::vector<NamedTensorData> tensors,
                     ReadCheckpointTensors(resume.dir(), manifest, names));
    return parts.RestoreState(tensors, manifest.applied_steps());
  }();
  if (restored.ok()) {
    for (const std::string& name : names) report.add_loaded(name);
  } else {
    report.set_error(
        absl::StrCat(RankName(setup_.rank(), setup_.stage()), ": ", restored.message()));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> gathered,
                   control_.GatherToRoot(report, absl::Now() + timeout_, kControlTagResume));
  absl::Status outcome;
  if (control_.rank() == 0) {
    outcome = [&]() -> absl::Status {
      absl::flat_hash_set<std::string> loaded;
      for (size_t r = 0; r < gathered.size(); ++r) {
        pb::ResumeReport received;
        if (!received.ParseFromString(gathered[r])) {
          return absl::DataLossError(absl::StrCat("unreadable resume report from rank ", r));
        }
        if (received.has_error()) return absl::FailedPreconditionError(received.error());
        loaded.insert(received.loaded().begin(), received.loaded().end());
      }
      if (manifest.dataset_size() != dataset_size) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the checkpoint was taken on a training split of ", manifest.dataset_size(),
            " samples, this plan's has ", dataset_size,
            ": the position in the data would not carry over (resume with the same data)"));
      }
      std::vector<std::string> unused;
      for (const pb::CheckpointTensor& tensor : manifest.tensors()) {
        if (!loaded.contains(tensor.name())) unused.push_back(tensor.name());
      }
      if (!unused.empty()) {
        const size_t shown = std::min<size_t>(unused.size(), 5);
        return absl::FailedPreconditionError(
            absl::StrCat("the checkpoint holds ", unused.size(),
                         " tensor(s) that no stage of this plan's model "
                         "has (",
                         absl::StrJoin(unused.begin(), unused.begin() + shown, ", "),
                         unused.size() > shown ? ", ..." : "",
                         "): it was taken with another model or optimizer"));
      }
      for (const std::string& change : resume.changes()) logger_.Info(change);
      logger_.Info(absl::StrCat("resumed from ", resume.dir(), ": ", manifest.step(),
                                " steps done (", manifest.applied_steps(), " updates applied), ",
                                manifest.tensors_size(), " tensors restored"));
      return absl::OkStatus();
    }();
    outcome = WithContext(outcome, absl::StrCat("resuming from ", resume.dir()));
  }
  return Conclude(outcome, kControlTagResume, "resuming");
}

absl::Status CheckpointSession::Conclude(const absl::Status& outcome, int tag,
                                         absl::string_view what) {
  pb::CheckpointResult result;
  if (!outcome.ok()) result.set_error(std::string(outcome.message()));
  RETURN_IF_ERROR(control_.Broadcast(result, absl::Now() + timeout_, tag));
  if (control_.rank() == 0 || !result.has_error()) return outcome;
  // Rank 0 reports the failure; the others stop with it without announcing it again.
  return absl::AbortedError(absl::StrCat(what, " failed (rank 0 reports it): ", result.error()));
}

}  // namespace gpipe
