#include "runtime/plan/timed_partition.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <queue>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max();

absl::Status CheckProblem(const PartitionProblem& p) {
  const int layers = static_cast<int>(p.layers.size());
  if (p.stages < 1 || p.stages > layers) {
    return absl::InvalidArgumentError(absl::StrCat("cannot cut ", layers, " layers into ", p.stages,
                                                   " non-empty stages; use 1 to ", layers,
                                                   " stages"));
  }
  if (p.micro_batches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro_batches must be >= 1, got ", p.micro_batches));
  }
  if (static_cast<int>(p.live.size()) != p.stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "live has ", p.live.size(), " entries; it needs one per stage (", p.stages, ")"));
  }
  for (int s = 0; s < p.stages; ++s) {
    if (p.live[s] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("live[", s, "] is ", p.live[s], "; each stage keeps at least 1"));
    }
  }
  if (p.memory_limit < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory_limit must be >= 0 (0: none), got ", p.memory_limit));
  }
  for (int i = 0; i < layers; ++i) {
    const PartitionLayer& l = p.layers[i];
    for (const double v : {l.time, l.cut_before}) {
      if (!std::isfinite(v) || v < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer ", i, " has a time of ", v, "; times must be finite and >= 0"));
      }
    }
    for (const int64_t b :
         {l.fixed_bytes, l.saved_bytes, l.input_bytes, l.input_once_bytes, l.work_bytes}) {
      if (b < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer ", i, " has ", b, " bytes; byte counts must be >= 0"));
      }
    }
  }
  return absl::OkStatus();
}

// Prefix sums and a range-maximum table over the layers; stage time and memory in O(1).
class StageCosts {
 public:
  explicit StageCosts(const PartitionProblem& p)
      : p_(p), layers_(static_cast<int>(p.layers.size())) {
    time_.assign(layers_ + 1, 0.0);
    fixed_.assign(layers_ + 1, 0);
    saved_.assign(layers_ + 1, 0);
    for (int i = 0; i < layers_; ++i) {
      time_[i + 1] = time_[i] + p.layers[i].time;
      fixed_[i + 1] = SaturatingAdd(fixed_[i], p.layers[i].fixed_bytes);
      saved_[i + 1] = SaturatingAdd(saved_[i], p.layers[i].saved_bytes);
    }
    work_.push_back({});
    for (const PartitionLayer& l : p.layers) work_[0].push_back(l.work_bytes);
    for (int width = 1; 2 * width <= layers_; width *= 2) {
      const std::vector<int64_t>& prev = work_.back();
      std::vector<int64_t> next(layers_ - 2 * width + 1);
      for (size_t i = 0; i < next.size(); ++i) next[i] = std::max(prev[i], prev[i + width]);
      work_.push_back(std::move(next));
    }
  }

  int layers() const { return layers_; }
  double Time(int begin, int end) const { return time_[end] - time_[begin]; }

  // Stage `stage` over layers [begin, end), saturating at the largest int64.
  int64_t Bytes(int begin, int end, int stage) const {
    const __int128 live = p_.live[stage];
    const __int128 kept = live * (static_cast<__int128>(p_.layers[begin].input_bytes) +
                                  (saved_[end] - saved_[begin]));
    const __int128 total = static_cast<__int128>(fixed_[end] - fixed_[begin]) + kept +
                           p_.layers[begin].input_once_bytes + MaxWork(begin, end);
    return total > kMaxBytes ? kMaxBytes : static_cast<int64_t>(total);
  }

 private:
  static int64_t SaturatingAdd(int64_t a, int64_t b) {
    return a > kMaxBytes - b ? kMaxBytes : a + b;
  }
  int64_t MaxWork(int begin, int end) const {
    int level = 0;
    while ((2 << level) <= end - begin) ++level;
    return std::max(work_[level][begin], work_[level][end - (1 << level)]);
  }

  const PartitionProblem& p_;
  int layers_;
  std::vector<double> time_;
  std::vector<int64_t> fixed_, saved_;
  std::vector<std::vector<int64_t>> work_;  // work_[k][i]: max over [i, i + 2^k)
};

struct CutPlan {
  double cut_cost = kInfinity;  // infinity: no partition under the cap and the limit
  std::vector<int> starts;
};

// The cheapest cuts into `stages` stages with every stage's time <= cap and memory within the
// limit. f[s][t]: least cut cost of layers [0, t) as s stages. For a fixed start j and stage s,
// the feasible ends form a range (j, last(j, s)] because time and memory only grow with the end;
// a sweep over t with a heap of open starts gives each f[s + 1][t] in O(log L).
CutPlan CheapestCuts(const PartitionProblem& p, const StageCosts& costs, double cap) {
  const int layers = costs.layers();
  const int stages = p.stages;
  const int64_t limit = p.memory_limit > 0 ? p.memory_limit : kMaxBytes;
  auto fits = [&](int begin, int end, int stage) {
    return costs.Time(begin, end) <= cap && costs.Bytes(begin, end, stage) <= limit;
  };
  std::vector<std::vector<double>> f(stages + 1, std::vector<double>(layers + 1, kInfinity));
  std::vector<std::vector<int>> parent(stages + 1, std::vector<int>(layers + 1, -1));
  f[0][0] = 0;
  for (int s = 0; s < stages; ++s) {
    // Open starts j: (value, j, last feasible end). The top is the least value, then the
    // largest j (boundaries as late as possible).
    using Open = std::tuple<double, int, int>;
    auto worse = [](const Open& a, const Open& b) {
      if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) > std::get<0>(b);
      return std::get<1>(a) < std::get<1>(b);
    };
    std::priority_queue<Open, std::vector<Open>, decltype(worse)> open(worse);
    for (int t = 1; t <= layers; ++t) {
      const int j = t - 1;
      if (f[s][j] < kInfinity && fits(j, t, s)) {
        // The last end this start can reach: binary search, feasibility being monotone in t.
        int lo = t, hi = layers;
        while (lo < hi) {
          const int mid = lo + (hi - lo + 1) / 2;
          if (fits(j, mid, s)) {
            lo = mid;
          } else {
            hi = mid - 1;
          }
        }
        const double value = f[s][j] + (j > 0 ? p.layers[j].cut_before : 0.0);
        open.emplace(value, j, lo);
      }
      while (!open.empty() && std::get<2>(open.top()) < t) open.pop();
      if (!open.empty()) {
        f[s + 1][t] = std::get<0>(open.top());
        parent[s + 1][t] = std::get<1>(open.top());
      }
    }
  }
  CutPlan plan;
  if (f[stages][layers] == kInfinity) return plan;
  plan.cut_cost = f[stages][layers];
  plan.starts.assign(stages, 0);
  for (int s = stages, t = layers; s >= 1; --s) {
    t = parent[s][t];
    plan.starts[s - 1] = t;
  }
  return plan;
}

// The least memory any partition needs on its fullest stage (for the error message):
// m[s][t] = min over j of max(m[s - 1][j], bytes of [j, t) as stage s - 1). O(K L^2).
int64_t LeastFullestStage(const PartitionProblem& p, const StageCosts& costs) {
  const int layers = costs.layers();
  std::vector<int64_t> prev(layers + 1, kMaxBytes), next(layers + 1, kMaxBytes);
  prev[0] = 0;
  for (int s = 0; s < p.stages; ++s) {
    std::fill(next.begin(), next.end(), kMaxBytes);
    for (int t = 1; t <= layers; ++t) {
      for (int j = 0; j < t; ++j) {
        if (prev[j] == kMaxBytes) continue;
        next[t] = std::min(next[t], std::max(prev[j], costs.Bytes(j, t, s)));
      }
    }
    std::swap(prev, next);
  }
  return prev[layers];
}

}  // namespace

absl::StatusOr<PartitionChoice> PartitionForStepTime(const PartitionProblem& problem) {
  if (absl::Status status = CheckProblem(problem); !status.ok()) return status;
  const StageCosts costs(problem);
  const int layers = costs.layers();
  const double tail = problem.micro_batches - 1;

  // The least cut cost with no cap: no partition under any cap does better.
  const CutPlan free = CheapestCuts(problem, costs, kInfinity);
  if (free.cut_cost == kInfinity) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no partition of ", layers, " layers into ", problem.stages,
                     " stages keeps every stage within ", problem.memory_limit,
                     " bytes; the best partition needs ", LeastFullestStage(problem, costs),
                     " bytes on its fullest stage by this model (raise the limit, add stages or "
                     "re-materialize)"));
  }
  // Candidate caps: every stage time at or above the lower bound max(largest layer, total / K).
  double lower = costs.Time(0, layers) / problem.stages;
  for (int i = 0; i < layers; ++i) lower = std::max(lower, costs.Time(i, i + 1));
  std::vector<double> caps;
  for (int j = 0; j < layers; ++j) {
    for (int t = j + 1; t <= layers; ++t) {
      const double time = costs.Time(j, t);
      if (time >= lower) caps.push_back(time);
    }
  }
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());

  // Feasibility only grows with the cap: find the least feasible cap by bisection, then walk up.
  size_t lo = 0, hi = caps.size() - 1;  // caps.back() is the whole model: always feasible here
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (CheapestCuts(problem, costs, caps[mid]).cut_cost < kInfinity) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  CutPlan best;
  double best_objective = kInfinity;
  for (size_t i = lo; i < caps.size(); ++i) {
    const double cap = caps[i];
    if (tail * cap + free.cut_cost >= best_objective) break;
    CutPlan plan = CheapestCuts(problem, costs, cap);
    if (plan.cut_cost == kInfinity) continue;
    const double objective = tail * cap + plan.cut_cost;
    if (objective < best_objective) {
      best_objective = objective;
      best = std::move(plan);
    }
  }

  PartitionChoice choice;
  choice.starts = best.starts;
  choice.cut_cost = best.cut_cost;
  for (int s = 0; s < problem.stages; ++s) {
    const int end = s + 1 < problem.stages ? best.starts[s + 1] : layers;
    choice.bottleneck = std::max(choice.bottleneck, costs.Time(best.starts[s], end));
    choice.stage_bytes.push_back(costs.Bytes(best.starts[s], end, s));
  }
  choice.objective = tail * choice.bottleneck + choice.cut_cost;
  return choice;
}

}  // namespace gpipe
