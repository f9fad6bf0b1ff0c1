// The training section: batch, steps, evaluation, precision and the optimizer.
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/plan/settings_check_helpers.h"
#include "runtime/plan/settings_checks.h"
#include "runtime/data/dataset.h"
#include "runtime/data/open_dataset.h"

namespace gpipe {
namespace {

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

// training.lr_schedule: counts >= 0, the warm-up inside the decay and the run, the floor a
// fraction of the peak.
void CheckLrSchedule(const pb::Training& training, PlanErrors& errors) {
  if (!training.has_lr_schedule()) return;
  const pb::LrSchedule& schedule = training.lr_schedule();
  const std::string at = "training.lr_schedule";
  const int64_t warmup = schedule.warmup_steps();
  const int64_t decay_steps = schedule.decay_steps();
  if (warmup < 0) {
    errors.Add(at + ".warmup_steps",
               absl::StrCat("is ", warmup, "; it must be >= 0 (0: no warm-up)"));
  } else if (training.has_steps() && training.steps() >= 1 && warmup > training.steps()) {
    errors.Add(at + ".warmup_steps",
               absl::StrCat("is ", warmup, ", longer than the run (training.steps ",
                            training.steps(), " at ", errors.LocationOf("training.steps"),
                            "); the peak would never be reached: use at most ", training.steps()));
  } else if (decay_steps > 0 && warmup > decay_steps) {
    errors.Add(at + ".warmup_steps",
               absl::StrCat("is ", warmup, ", longer than decay_steps ", decay_steps, " (at ",
                            errors.LocationOf(at + ".decay_steps"),
                            "); the decay ends at update decay_steps, so it must be >= "
                            "warmup_steps"));
  }
  if (decay_steps < 0) {
    errors.Add(at + ".decay_steps",
               absl::StrCat("is ", decay_steps, "; it must be >= 0 (0: training.steps)"));
  }
  const double min_lr_ratio = schedule.min_lr_ratio();
  if (!(min_lr_ratio >= 0 && min_lr_ratio <= 1)) {
    errors.Add(at + ".min_lr_ratio",
               absl::StrCat("is ", Show(min_lr_ratio),
                            "; it must be in [0, 1] (the final learning rate as a fraction of "
                            "the optimizer's lr)"));
  }
}

}  // namespace

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
                            "data.tokens.eval_fraction > 0, "
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
  CheckLrSchedule(training, errors);
  if (!(std::isfinite(training.clip_grad_norm()) && training.clip_grad_norm() >= 0)) {
    errors.Add("training.clip_grad_norm",
               absl::StrCat("is ", Show(training.clip_grad_norm()),
                            "; it must be > 0 (the largest gradient norm kept; 0: no clipping)"));
  }
  if (training.shard_optimizer_state() && plan.pipeline().data_parallel() < 2) {
    errors.Add(
        "training.shard_optimizer_state",
        absl::StrCat("is true but pipeline.data_parallel is ", plan.pipeline().data_parallel(),
                     ": the optimizer state is sharded over a stage's data-parallel "
                     "replicas, so it needs data_parallel >= 2 (or remove the field)"));
  }
}

}  // namespace gpipe
