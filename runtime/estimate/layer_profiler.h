// Layer profiler: measures what each top-level layer of a plan costs on a real device, so the
// simulated device can take its costs from a profile rather than from FLOP counts.
//
// Every layer is built alone at its analyzed per-sample shapes, with parameters initialized as
// training initializes them, and run on random inputs of the plan's micro-batch size
// (global_batch / micro_batches): forward, then the backward as the runtime runs it — for a
// layer that splits (SplitsBackward) its BackwardInput and BackwardWeight halves timed apart;
// for one that does not, its whole Backward, reported as backward_input_us with
// backward_weight_us 0 (the runtime runs it whole during B). Like the runtime, the model's first
// layer computes no input gradient. Each time is the median of `repeats` calls after `warmup`
// untimed ones, on options.clock (wall time unless told). Layers that read int64 ids (embedding)
// get ids drawn below their first parameter's leading dimension (the table's size).
//
// The device must be host-accessible (inputs are filled in place). Not thread-safe: it uses the
// device from the calling thread only.
#ifndef GPIPE_RUNTIME_ESTIMATE_LAYER_PROFILER_H_
#define GPIPE_RUNTIME_ESTIMATE_LAYER_PROFILER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "layers/layer.h"
#include "layers/registry.h"
#include "proto/plan.pb.h"
#include "runtime/device/device.h"
#include "runtime/plan/analyzed_plan.h"

namespace gpipe {

// What a time is measured on. kWall is what a dedicated device would take; kProcessCpu (CPU time
// of the whole process, kernel time such as page faults included) is the stabler measure where
// other processes share the cores, and equals wall time on an idle core for one thread.
enum class ProfileClock { kWall, kProcessCpu };

// Microseconds on `clock` since an arbitrary origin.
double NowMicros(ProfileClock clock);

struct ProfileOptions {
  int repeats = 5;    // timed calls per phase (>= 1); the median is reported
  int warmup = 1;     // untimed calls per phase before them (>= 0)
  uint64_t seed = 1;  // keys the random inputs and output gradients
  int threads = 1;    // the device's compute threads, as set by its owner (written to the JSON)
  ProfileClock clock = ProfileClock::kWall;
};

// One layer's medians, in microseconds. backward_us is the whole Backward; backward_input_us and
// backward_weight_us are the split halves when `splits`, else backward_us and 0.
struct LayerTiming {
  std::string name;
  bool splits = false;
  double forward_us = 0;
  double backward_us = 0;
  double backward_input_us = 0;
  double backward_weight_us = 0;
};

// Times `layer` on `batch` samples. `layer_index` keys parameter initialization (as the model's
// index would); with !need_input_grad the backward computes no dx (the model's first layer).
absl::StatusOr<LayerTiming> ProfileLayer(const Layer& layer, Device& device, int64_t batch,
                                         int layer_index, bool need_input_grad,
                                         const ProfileOptions& options);

// The profile JSON of every top-level layer of an analyzed plan, in model order:
//   {"device": "cpu", "threads": 1, "micro_batch": 16, "repeats": 5,
//    "layers": [{"name": "fc1", "forward_us": 12.5, "backward_input_us": 10.1,
//                "backward_weight_us": 9.8}, ...]}
// Errors name the layer (its index and name).
absl::StatusOr<std::string> ProfileAnalyzedPlanLayers(const AnalyzedPlan& analyzed,
                                                      const LayerRegistry& registry, Device& device,
                                                      const ProfileOptions& options);

// As above after analyzing `plan` (AnalyzePlan); relative data paths in it resolve against the
// working directory, so pass a plan whose paths are absolute or already resolved
// (AnalyzedPlan::plan), or use ProfileAnalyzedPlanLayers.
absl::StatusOr<std::string> ProfilePlanLayers(const pb::Plan& plan, const LayerRegistry& registry,
                                              Device& device, const ProfileOptions& options);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_ESTIMATE_LAYER_PROFILER_H_
