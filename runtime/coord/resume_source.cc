#include "runtime/coord/resume_source.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "runtime/ckpt/checkpoint_layout.h"
#include "runtime/ckpt/checkpoint_manifest.h"
#include "runtime/core/status_macros.h"
#include "runtime/plan/plan_diff.h"

namespace gpipe {
namespace {

absl::Status SameAs(const std::string& field, const std::string& checkpoint,
                    const std::string& plan) {
  if (checkpoint == plan) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(field, " is ", plan, " but the checkpoint was taken with ", checkpoint,
                   ": the position in the data would not carry over; resume with ", checkpoint));
}

// Whether the model has a batch-norm layer (its running statistics are averaged over replicas).
bool HasBatchNorm(const pb::Plan& plan) {
  for (const pb::Layer& layer : plan.model().layers()) {
    if (layer.has_batch_norm1d() || layer.has_batch_norm2d()) return true;
  }
  return false;
}

// At most this many changed fields are listed; the rest are counted.
constexpr size_t kChangesShown = 20;

// The running plan's differences from the checkpoint's, one line each.
std::vector<std::string> DescribeChanges(const pb::Plan& checkpoint, const pb::Plan& plan) {
  const std::vector<PlanDifference> differences = DiffPlans(checkpoint, plan);
  std::vector<std::string> lines;
  for (const PlanDifference& d : differences) {
    if (lines.size() == kChangesShown) {
      lines.push_back(
          absl::StrCat("and ", differences.size() - kChangesShown, " more changed field(s)"));
      break;
    }
    std::string line =
        absl::StrCat("resuming with ", d.field, " ", d.now, " (checkpoint: ", d.before, ")");
    if (d.field == "pipeline.data_parallel" && HasBatchNorm(plan)) {
      absl::StrAppend(&line, "; batch-norm running statistics are averaged over the replicas, ",
                      "so from here on they average over ", d.now, " replicas instead of ",
                      d.before);
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

// The optimizer's rule ("sgd", "adam", "adamw"), or "none".
std::string OptimizerName(const pb::Optimizer& optimizer) {
  const auto* field = optimizer.GetDescriptor()->oneof_decl(0);
  const auto* chosen = optimizer.GetReflection()->GetOneofFieldDescriptor(optimizer, field);
  return chosen != nullptr ? std::string(chosen->name()) : "none";
}

}  // namespace

absl::StatusOr<pb::ResumeFrom> ResolveResume(const std::string& resume, const pb::Plan& plan,
                                             const std::string& data_fingerprint) {
  ASSIGN_OR_RETURN(const std::string path, ResolveCheckpoint(resume, plan.checkpoint().dir()));
  ASSIGN_OR_RETURN(pb::CheckpointManifest manifest, ReadCheckpointManifest(path));
  const std::string context = absl::StrCat("--resume ", resume, " (", path, ")");
  if (manifest.step() > plan.training().steps()) {
    return absl::InvalidArgumentError(absl::StrCat(
        context, ": the checkpoint is after step ", manifest.step(), " but training.steps is ",
        plan.training().steps(), "; raise training.steps to continue training"));
  }
  const auto boolean = [](bool b) { return std::string(b ? "true" : "false"); };
  RETURN_IF_ERROR(WithContext(SameAs("training.global_batch", absl::StrCat(manifest.global_batch()),
                                     absl::StrCat(plan.training().global_batch())),
                              context));
  RETURN_IF_ERROR(WithContext(
      SameAs("training.seed", absl::StrCat(manifest.seed()), absl::StrCat(plan.training().seed())),
      context));
  RETURN_IF_ERROR(WithContext(
      SameAs("data.shuffle", boolean(manifest.shuffle()), boolean(plan.data().shuffle())),
      context));
  const std::string optimizer = OptimizerName(plan.training().optimizer());
  const std::string saved = OptimizerName(manifest.plan().training().optimizer());
  if (optimizer != saved) {
    return absl::FailedPreconditionError(absl::StrCat(
        context, ": training.optimizer is ", optimizer, " but the checkpoint was taken with ",
        saved, ", whose state does not carry over; resume with ", saved,
        " (its hyperparameters may change)"));
  }
  if (manifest.has_data_fingerprint() && manifest.data_fingerprint() != data_fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(
        context, ": the checkpoint was taken on other data; resume with the data it was trained ",
        "on.\n  checkpoint's data: ",
        absl::StrReplaceAll(manifest.data_fingerprint(), {{"\n", "\n                     "}}),
        "\n  this plan's data:  ",
        absl::StrReplaceAll(data_fingerprint, {{"\n", "\n                     "}})));
  }
  pb::ResumeFrom from;
  for (std::string& line : DescribeChanges(manifest.plan(), plan)) {
    from.add_changes(std::move(line));
  }
  from.set_dir(std::filesystem::absolute(path).lexically_normal().string());
  *from.mutable_manifest() = std::move(manifest);
  return from;
}

}  // namespace gpipe
