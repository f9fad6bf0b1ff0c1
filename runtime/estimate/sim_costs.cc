#include "runtime/estimate/sim_costs.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

bool NonNegative(double v) { return std::isfinite(v) && v >= 0; }

absl::Duration Us(double us) { return absl::Nanoseconds(std::llround(us * 1e3)); }

}  // namespace

const char* SimCostSourceName(SimCostSource source) {
  switch (source) {
    case SimCostSource::kLayerCosts:
      return "layer_costs";
    case SimCostSource::kProfile:
      return "profile";
    case SimCostSource::kFlops:
      return "flops";
  }
  return "?";
}

absl::StatusOr<SimCosts> SimCosts::Create(const pb::Sim& sim, int64_t micro_batch_size) {
  if (micro_batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("sim: micro-batch size must be >= 1, got ", micro_batch_size));
  }
  if (!(std::isfinite(sim.peak_gflops()) && sim.peak_gflops() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("runtime.sim.peak_gflops must be > 0, got ", sim.peak_gflops()));
  }
  for (const auto& [name, value] : {std::pair<const char*, double>{"link_gbps", sim.link_gbps()},
                                    {"host_link_gbps", sim.host_link_gbps()}}) {
    if (!(std::isfinite(value) && value > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("runtime.sim.", name, " must be > 0, got ", value));
    }
  }
  for (const auto& [name, value] :
       {std::pair<const char*, double>{"link_latency_us", sim.link_latency_us()},
        {"loss_us", sim.loss_us()},
        {"optimizer_us", sim.optimizer_us()}}) {
    if (!NonNegative(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("runtime.sim.", name, " must be >= 0, got ", value));
    }
  }
  SimCosts costs;
  costs.micro_batch_size_ = micro_batch_size;
  costs.peak_flops_per_s_ = sim.peak_gflops() * 1e9;
  costs.link_latency_ = Us(sim.link_latency_us());
  costs.link_bytes_per_s_ = sim.link_gbps() * 1e9;
  costs.host_link_bytes_per_s_ = sim.host_link_gbps() * 1e9;
  costs.loss_ = Us(sim.loss_us());
  costs.optimizer_ = Us(sim.optimizer_us());
  for (int i = 0; i < sim.layer_costs_size(); ++i) {
    const pb::LayerCost& c = sim.layer_costs(i);
    if (!NonNegative(c.forward_us()) || !NonNegative(c.backward_input_us()) ||
        !NonNegative(c.backward_weight_us())) {
      return absl::InvalidArgumentError(absl::StrCat("runtime.sim.layer_costs[", i, "] (layer '",
                                                     c.layer(), "') has a negative time"));
    }
    costs.table_.try_emplace(c.layer(), SimOpTimes{.forward = Us(c.forward_us()),
                                                   .backward_input = Us(c.backward_input_us()),
                                                   .backward_weight = Us(c.backward_weight_us()),
                                                   .source = SimCostSource::kLayerCosts});
  }
  if (sim.has_profile() && !sim.profile().empty()) {
    ASSIGN_OR_RETURN(SimProfile profile, LoadSimProfile(sim.profile()));
    costs.profile_scale_ =
        static_cast<double>(micro_batch_size) / static_cast<double>(profile.micro_batch);
    costs.profile_ = std::move(profile);
  }
  return costs;
}

SimOpTimes SimCosts::ForLayer(const std::string& name, double forward_flops_per_sample) const {
  if (auto it = table_.find(name); it != table_.end()) return it->second;
  if (profile_.has_value()) {
    if (auto it = profile_->layers.find(name); it != profile_->layers.end()) {
      return {.forward = Us(it->second.forward * profile_scale_),
              .backward_input = Us(it->second.backward_input * profile_scale_),
              .backward_weight = Us(it->second.backward_weight * profile_scale_),
              .source = SimCostSource::kProfile};
    }
  }
  const double seconds = std::max(0.0, forward_flops_per_sample) *
                         static_cast<double>(micro_batch_size_) / peak_flops_per_s_;
  const absl::Duration forward = absl::Nanoseconds(std::llround(seconds * 1e9));
  return {.forward = forward,
          .backward_input = forward,
          .backward_weight = forward,
          .source = SimCostSource::kFlops};
}

absl::Duration SimCosts::Transfer(int64_t bytes) const {
  const double seconds = static_cast<double>(std::max<int64_t>(bytes, 0)) / link_bytes_per_s_;
  return link_latency_ + absl::Nanoseconds(std::llround(seconds * 1e9));
}

absl::Duration SimCosts::AllReduce(int64_t bytes, int ranks) const {
  if (ranks <= 1) return absl::ZeroDuration();
  // Reduce-scatter then all-gather: 2(n-1) steps, each moving one n-th of the buffer.
  return 2 * RingPass(bytes, ranks);
}

absl::Duration SimCosts::HostCopy(int64_t bytes) const {
  return absl::Seconds(static_cast<double>(bytes) / host_link_bytes_per_s_);
}

absl::Duration SimCosts::RingPass(int64_t bytes, int ranks) const {
  if (ranks <= 1) return absl::ZeroDuration();
  // ranks - 1 steps, each moving one ranks-th of the buffer.
  const int64_t chunk = (std::max<int64_t>(bytes, 0) + ranks - 1) / ranks;
  return (ranks - 1) * Transfer(chunk);
}

}  // namespace gpipe
