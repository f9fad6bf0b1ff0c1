#include "runtime/plan/partition.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace gpipe {

absl::StatusOr<std::vector<int>> BalancePartition(std::span<const double> costs, int stages) {
  const int layers = static_cast<int>(costs.size());
  if (stages < 1 || stages > layers) {
    return absl::InvalidArgumentError(absl::StrCat("cannot cut ", layers, " layers into ", stages,
                                                   " non-empty stages; use 1 to ", layers,
                                                   " stages"));
  }
  std::vector<double> prefix(layers + 1, 0.0);
  for (int i = 0; i < layers; ++i) {
    if (!std::isfinite(costs[i]) || costs[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer ", i, " has cost ", costs[i], "; costs must be finite and >= 0"));
    }
    prefix[i + 1] = prefix[i] + costs[i];
  }
  auto part = [&](int begin, int end) { return prefix[end] - prefix[begin]; };

  // best[m][j]: the smallest possible largest-stage cost when layers [j, L) form m stages.
  constexpr double kInfeasible = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(layers + 1, kInfeasible));
  for (int j = 0; j < layers; ++j) best[1][j] = part(j, layers);
  for (int m = 2; m <= stages; ++m) {
    // The first of the m stages is [j, t); the other m-1 need at least m-1 layers after t.
    for (int j = 0; j + m <= layers; ++j) {
      for (int t = j + 1; t + (m - 1) <= layers; ++t) {
        best[m][j] = std::min(best[m][j], std::max(part(j, t), best[m - 1][t]));
      }
    }
  }
  const double optimum = best[stages][0];

  // Walk forward, putting each boundary as late as the optimum allows.
  std::vector<int> starts = {0};
  for (int m = stages; m >= 2; --m) {
    const int begin = starts.back();
    for (int t = layers - (m - 1); t > begin; --t) {
      if (std::max(part(begin, t), best[m - 1][t]) <= optimum) {
        starts.push_back(t);
        break;
      }
    }
  }
  return starts;
}

}  // namespace gpipe
