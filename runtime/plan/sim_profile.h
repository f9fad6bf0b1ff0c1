// SimProfile: per-layer op times measured on a real device, read from the JSON profile file a
// profiler writes, so a simulated device can replay that device's speed:
//   {"device": "cpu", "micro_batch": 16,
//    "layers": [{"name": "fc1", "forward_us": 12.5, "backward_input_us": 10.1,
//                "backward_weight_us": 9.8}, ...]}
// Times are per micro-batch of `micro_batch` samples. Unknown keys are ignored (the profiler may
// add fields); a layer listed twice keeps its first entry. Value type.
#ifndef GPIPE_RUNTIME_PLAN_SIM_PROFILE_H_
#define GPIPE_RUNTIME_PLAN_SIM_PROFILE_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace gpipe {

// One layer's times in microseconds per micro-batch.
struct SimLayerTimesUs {
  double forward = 0;
  double backward_input = 0;
  double backward_weight = 0;
};

struct SimProfile {
  std::string device;
  int64_t micro_batch = 0;
  absl::flat_hash_map<std::string, SimLayerTimesUs> layers;
};

// INVALID_ARGUMENT naming `source` and the bad field ("layers[2].forward_us must be a number
// >= 0") for malformed JSON, a missing or non-positive integer micro_batch, a layer without a
// name or with a negative or missing time.
absl::StatusOr<SimProfile> ParseSimProfile(const std::string& json, const std::string& source);
// Reads and parses the file; NOT_FOUND (cannot open) and DATA_LOSS (read error) name the path.
absl::StatusOr<SimProfile> LoadSimProfile(const std::string& path);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_SIM_PROFILE_H_
