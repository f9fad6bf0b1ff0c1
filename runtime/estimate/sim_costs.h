// SimCosts: what each op of a simulated device costs, resolved from the plan's runtime.sim.
// A layer's forward, backward-input and backward-weight times per micro-batch come from the
// first source that has the layer:
//   1. runtime.sim.layer_costs, by layer name (the first entry naming it);
//   2. the profile file (runtime.sim.profile), scaled linearly by
//      plan micro-batch size / profile micro_batch;
//   3. FLOPs at peak: forward = forward FLOPs per sample * micro-batch size / peak_gflops, and
//      backward-input and backward-weight the same again each.
// Transfers: latency + bytes / bandwidth. A ring all-reduce of B bytes over n ranks:
// 2(n-1) steps of latency + (B/n) / bandwidth each. Value type; thread-safe once built.
#ifndef GPIPE_RUNTIME_ESTIMATE_SIM_COSTS_H_
#define GPIPE_RUNTIME_ESTIMATE_SIM_COSTS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/plan.pb.h"
#include "runtime/plan/sim_profile.h"

namespace gpipe {

enum class SimCostSource { kLayerCosts, kProfile, kFlops };
const char* SimCostSourceName(SimCostSource source);  // "layer_costs", "profile", "flops"

// One layer's op times for one micro-batch of the plan.
struct SimOpTimes {
  absl::Duration forward;
  absl::Duration backward_input;
  absl::Duration backward_weight;
  SimCostSource source = SimCostSource::kFlops;
};

class SimCosts {
 public:
  // Reads runtime.sim.profile when set (relative paths resolve against the working directory).
  // Errors: an unreadable or malformed profile, non-positive peak_gflops, link_gbps or
  // host_link_gbps, negative times (the plan checks report these earlier with the field's
  // location).
  static absl::StatusOr<SimCosts> Create(const pb::Sim& sim, int64_t micro_batch_size);

  // The times of the layer named `name` whose forward takes `forward_flops_per_sample`.
  SimOpTimes ForLayer(const std::string& name, double forward_flops_per_sample) const;
  // A point-to-point transfer of `bytes`.
  absl::Duration Transfer(int64_t bytes) const;
  // A ring all-reduce of `bytes` over `ranks` ranks (zero for one rank).
  absl::Duration AllReduce(int64_t bytes, int ranks) const;
  // A ring reduce-scatter or all-gather of `bytes` over `ranks` ranks: half an all-reduce.
  absl::Duration RingPass(int64_t bytes, int ranks) const;
  // A copy of `bytes` between the device and host memory (runtime.sim.host_link_gbps).
  absl::Duration HostCopy(int64_t bytes) const;
  absl::Duration loss() const { return loss_; }
  absl::Duration optimizer() const { return optimizer_; }
  int64_t micro_batch_size() const { return micro_batch_size_; }

 private:
  SimCosts() = default;

  int64_t micro_batch_size_ = 1;
  double peak_flops_per_s_ = 1e11;
  absl::Duration link_latency_;
  double link_bytes_per_s_ = 25e9;
  double host_link_bytes_per_s_ = 25e9;
  absl::Duration loss_;
  absl::Duration optimizer_;
  absl::flat_hash_map<std::string, SimOpTimes> table_;  // layer_costs (first entry wins)
  std::optional<SimProfile> profile_;
  double profile_scale_ = 1.0;  // plan micro-batch / profile micro_batch
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_ESTIMATE_SIM_COSTS_H_
