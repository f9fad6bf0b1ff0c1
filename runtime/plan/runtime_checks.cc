// The runtime section (threads, device, timeouts, the simulated device's costs) and the
// checkpoint section.
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/setting_limits.h"
#include "runtime/plan/sim_profile.h"
#include "runtime/plan/settings_check_helpers.h"
#include "runtime/plan/settings_checks.h"

namespace gpipe {
namespace {

// runtime.sim, checked only when runtime.device is SIM (other devices ignore it, as plan.proto
// documents, so one plan can switch devices with an override).
void CheckSim(const pb::Plan& plan, PlanErrors& errors) {
  const pb::Sim& sim = plan.runtime().sim();
  for (const auto& [name, value] :
       {std::pair<const char*, double>{"peak_gflops", sim.peak_gflops()},
        {"link_gbps", sim.link_gbps()},
        {"host_link_gbps", sim.host_link_gbps()}}) {
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
  if (runtime.gradient_bucket_bytes() < 1 || runtime.gradient_bucket_bytes() > kMaxByteCount) {
    errors.Add("runtime.gradient_bucket_bytes",
               absl::StrCat("is ", runtime.gradient_bucket_bytes(), "; it must be from 1 to ",
                            kMaxByteCount, " (1 EiB)"));
  }
  if (runtime.memory_limit_bytes() < 0 || runtime.memory_limit_bytes() > kMaxByteCount) {
    errors.Add(
        "runtime.memory_limit_bytes",
        absl::StrCat("is ", runtime.memory_limit_bytes(),
                     "; use 0 (no limit) or a byte budget up to ", kMaxByteCount, " (1 EiB)"));
  }
  // Unset means no MFU; a set value divides every step's FLOP rate, so it must be a real peak.
  if (runtime.has_peak_tflops() && !Positive(runtime.peak_tflops())) {
    errors.Add("runtime.peak_tflops",
               absl::StrCat("is ", Show(runtime.peak_tflops()),
                            "; give one device's peak dense TFLOP/s at the run's precision "
                            "(> 0, e.g. 989 for an H100 SXM in bf16), or remove it (no MFU)"));
  }
  if (runtime.trace_steps() < 0) {
    errors.Add("runtime.trace_steps",
               absl::StrCat("is ", runtime.trace_steps(), "; use 0 (every step) or a step count"));
  }
  const pb::Timeouts& timeouts = runtime.timeouts();
  for (const auto& [name, seconds] :
       {std::pair<const char*, double>{"wait_seconds", timeouts.wait_seconds()},
        std::pair<const char*, double>{"startup_seconds", timeouts.startup_seconds()}}) {
    // NaN fails both comparisons.
    if (!(seconds > 0 && seconds <= kMaxWaitSeconds)) {
      errors.Add(absl::StrCat("runtime.timeouts.", name),
                 absl::StrCat("is ", Show(seconds), "; every wait needs a deadline > 0 and <= ",
                              static_cast<int64_t>(kMaxWaitSeconds), " seconds"));
    }
  }
  if (runtime.device() == pb::SIM) CheckSim(plan, errors);
}

}  // namespace gpipe
