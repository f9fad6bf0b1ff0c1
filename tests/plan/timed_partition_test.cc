// PartitionForStepTime against brute force over every contiguous partition, on random times,
// cut costs, memory and limits; plus its argument checks and the out-of-memory answer.
#include "runtime/plan/timed_partition.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpipe {
namespace {

using ::testing::HasSubstr;

// The model, written out plainly: one stage's time and bytes.
double StageTime(const PartitionProblem& p, int begin, int end) {
  double sum = 0;
  for (int i = begin; i < end; ++i) sum += p.layers[i].time;
  return sum;
}

int64_t StageBytes(const PartitionProblem& p, int begin, int end, int stage) {
  int64_t fixed = 0, saved = 0, work = 0;
  for (int i = begin; i < end; ++i) {
    fixed += p.layers[i].fixed_bytes;
    saved += p.layers[i].saved_bytes;
    work = std::max(work, p.layers[i].work_bytes);
  }
  return fixed + p.live[stage] * (p.layers[begin].input_bytes + saved) +
         p.layers[begin].input_once_bytes + work;
}

struct Brute {
  bool feasible = false;
  double objective = 0;
  int64_t least_fullest = 0;
};

void Enumerate(int layers, int stages, std::vector<int>& starts,
               std::vector<std::vector<int>>& out) {
  if (static_cast<int>(starts.size()) == stages) {
    out.push_back(starts);
    return;
  }
  const int remaining = stages - static_cast<int>(starts.size());
  for (int next = starts.back() + 1; next + remaining - 1 < layers; ++next) {
    starts.push_back(next);
    Enumerate(layers, stages, starts, out);
    starts.pop_back();
  }
}

Brute BruteForce(const PartitionProblem& p) {
  const int layers = static_cast<int>(p.layers.size());
  std::vector<std::vector<int>> all;
  std::vector<int> starts = {0};
  Enumerate(layers, p.stages, starts, all);
  Brute best;
  best.least_fullest = INT64_MAX;
  for (const auto& s : all) {
    double bottleneck = 0, cuts = 0;
    int64_t fullest = 0;
    for (int k = 0; k < p.stages; ++k) {
      const int end = k + 1 < p.stages ? s[k + 1] : layers;
      bottleneck = std::max(bottleneck, StageTime(p, s[k], end));
      fullest = std::max(fullest, StageBytes(p, s[k], end, k));
      if (k > 0) cuts += p.layers[s[k]].cut_before;
    }
    best.least_fullest = std::min(best.least_fullest, fullest);
    if (p.memory_limit > 0 && fullest > p.memory_limit) continue;
    const double objective = (p.micro_batches - 1) * bottleneck + cuts;
    if (!best.feasible || objective < best.objective) {
      best.feasible = true;
      best.objective = objective;
    }
  }
  return best;
}

PartitionProblem RandomProblem(std::mt19937& rng, int layers, int stages) {
  std::uniform_int_distribution<int> time(0, 9), cut(0, 6), bytes(0, 50), micro(1, 8);
  PartitionProblem p;
  p.stages = stages;
  p.micro_batches = micro(rng);
  for (int i = 0; i < layers; ++i) {
    p.layers.push_back({.time = static_cast<double>(time(rng)),
                        .cut_before = static_cast<double>(cut(rng)),
                        .fixed_bytes = bytes(rng),
                        .saved_bytes = bytes(rng) / 5,
                        .input_bytes = bytes(rng) / 5,
                        .input_once_bytes = bytes(rng) / 10,
                        .work_bytes = bytes(rng) / 2});
  }
  for (int s = 0; s < stages; ++s)
    p.live.push_back(std::max(1, std::min(p.micro_batches, stages - s)));
  return p;
}

// Checks a choice against the model and the brute-force optimum.
void ExpectOptimal(const PartitionProblem& p, const PartitionChoice& c, const Brute& brute,
                   const std::string& what) {
  const int layers = static_cast<int>(p.layers.size());
  ASSERT_EQ(static_cast<int>(c.starts.size()), p.stages) << what;
  EXPECT_EQ(c.starts[0], 0) << what;
  double bottleneck = 0, cuts = 0;
  for (int k = 0; k < p.stages; ++k) {
    const int end = k + 1 < p.stages ? c.starts[k + 1] : layers;
    ASSERT_LT(c.starts[k], end) << what;
    bottleneck = std::max(bottleneck, StageTime(p, c.starts[k], end));
    if (k > 0) cuts += p.layers[c.starts[k]].cut_before;
    EXPECT_EQ(c.stage_bytes[k], StageBytes(p, c.starts[k], end, k)) << what << " stage " << k;
    if (p.memory_limit > 0) {
      EXPECT_LE(c.stage_bytes[k], p.memory_limit) << what;
    }
  }
  EXPECT_EQ(c.bottleneck, bottleneck) << what;
  EXPECT_EQ(c.cut_cost, cuts) << what;
  EXPECT_EQ(c.objective, (p.micro_batches - 1) * bottleneck + cuts) << what;
  EXPECT_EQ(c.objective, brute.objective) << what;
}

TEST(PartitionForStepTimeTest, MatchesBruteForceWithoutAMemoryLimit) {
  std::mt19937 rng(20261126);
  for (int trial = 0; trial < 400; ++trial) {
    const int layers = 1 + trial % 9;
    const int stages = 1 + (trial / 9) % layers;
    const PartitionProblem p = RandomProblem(rng, layers, stages);
    const std::string what = absl::StrCat("trial ", trial, ": ", layers, " layers, ", stages,
                                          " stages, M = ", p.micro_batches);
    absl::StatusOr<PartitionChoice> choice = PartitionForStepTime(p);
    ASSERT_TRUE(choice.ok()) << what << ": " << choice.status();
    ExpectOptimal(p, *choice, BruteForce(p), what);
  }
}

TEST(PartitionForStepTimeTest, MatchesBruteForceUnderMemoryLimitsOrSaysNothingFits) {
  std::mt19937 rng(7);
  int fitted = 0, refused = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int layers = 2 + trial % 8;
    const int stages = 1 + (trial / 8) % layers;
    PartitionProblem p = RandomProblem(rng, layers, stages);
    const Brute unlimited = BruteForce(p);
    // Limits around the least possible fullest stage: some fit, some cannot.
    p.memory_limit = std::max<int64_t>(1, unlimited.least_fullest - 5 + trial % 25);
    const Brute brute = BruteForce(p);
    const std::string what = absl::StrCat("trial ", trial, ": ", layers, " layers, ", stages,
                                          " stages, limit ", p.memory_limit);
    absl::StatusOr<PartitionChoice> choice = PartitionForStepTime(p);
    if (!brute.feasible) {
      ++refused;
      ASSERT_EQ(choice.status().code(), absl::StatusCode::kResourceExhausted) << what;
      EXPECT_THAT(choice.status().message(),
                  HasSubstr(absl::StrCat("needs ", unlimited.least_fullest, " bytes")))
          << what;
      continue;
    }
    ++fitted;
    ASSERT_TRUE(choice.ok()) << what << ": " << choice.status();
    ExpectOptimal(p, *choice, brute, what);
  }
  EXPECT_GT(fitted, 100);
  EXPECT_GT(refused, 50);
}

TEST(PartitionForStepTimeTest, MemoryMovesTheBoundaryAwayFromTheFastestSplit) {
  // Four equal layers, two stages: time alone splits 2 + 2, but layer 0 holds so much that,
  // under the limit, the first stage can hold it alone.
  PartitionProblem p;
  p.stages = 2;
  p.micro_batches = 4;
  p.live = {2, 1};
  for (int i = 0; i < 4; ++i) p.layers.push_back({.time = 1, .fixed_bytes = 10});
  p.layers[0].fixed_bytes = 60;
  absl::StatusOr<PartitionChoice> fastest = PartitionForStepTime(p);
  ASSERT_TRUE(fastest.ok()) << fastest.status();
  EXPECT_EQ(fastest->starts, (std::vector<int>{0, 2}));
  p.memory_limit = 65;
  absl::StatusOr<PartitionChoice> fitting = PartitionForStepTime(p);
  ASSERT_TRUE(fitting.ok()) << fitting.status();
  EXPECT_EQ(fitting->starts, (std::vector<int>{0, 1}));
  EXPECT_EQ(fitting->stage_bytes, (std::vector<int64_t>{60, 30}));
  EXPECT_EQ(fitting->bottleneck, 3);
}

TEST(PartitionForStepTimeTest, CheapCutsWinWhenTheyCostLessThanTheTail) {
  // Times 1,1,1,1 into 2 stages: the even split costs a cut of 10; cutting after layer 0 costs
  // 0 but makes the bottleneck 3. With M = 2 the tail is 1 x bottleneck: 3 + 0 beats 2 + 10.
  PartitionProblem p;
  p.stages = 2;
  p.micro_batches = 2;
  p.live = {2, 1};
  for (int i = 0; i < 4; ++i) p.layers.push_back({.time = 1, .cut_before = 10});
  p.layers[1].cut_before = 0;
  absl::StatusOr<PartitionChoice> choice = PartitionForStepTime(p);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->starts, (std::vector<int>{0, 1}));
  EXPECT_EQ(choice->objective, 3);
  // With 32 micro-batches the tail dominates and the even split wins despite its cut.
  p.micro_batches = 32;
  choice = PartitionForStepTime(p);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->starts, (std::vector<int>{0, 2}));
  EXPECT_EQ(choice->objective, 31 * 2 + 10);
}

TEST(PartitionForStepTimeTest, RejectsMalformedProblems) {
  PartitionProblem p;
  p.stages = 2;
  p.live = {1, 1};
  p.layers = {{.time = 1}, {.time = 1}};
  EXPECT_TRUE(PartitionForStepTime(p).ok());
  auto code = [](PartitionProblem q) { return PartitionForStepTime(q).status().code(); };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  PartitionProblem q = p;
  q.stages = 3;
  EXPECT_EQ(code(q), kInvalid);
  q = p;
  q.live = {1};
  EXPECT_EQ(code(q), kInvalid);
  q = p;
  q.live = {1, 0};
  EXPECT_EQ(code(q), kInvalid);
  q = p;
  q.micro_batches = 0;
  EXPECT_EQ(code(q), kInvalid);
  q = p;
  q.layers[1].time = -1;
  EXPECT_EQ(code(q), kInvalid);
  q = p;
  q.layers[0].cut_before = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(code(q), kInvalid);
  q = p;
  q.layers[0].saved_bytes = -1;
  EXPECT_EQ(code(q), kInvalid);
  q = p;
  q.memory_limit = -1;
  EXPECT_EQ(code(q), kInvalid);
}

TEST(PartitionForStepTimeTest, AThousandLayersIntoSixtyFourStagesIsOptimalAgainstTheBound) {
  // Not a timing test (bench/ measures speed): a large problem finishes and its bottleneck is
  // at least the lower bound max(largest layer, total / K).
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> time(0.5, 4.0), cut(0.0, 0.2);
  PartitionProblem p;
  p.stages = 64;
  p.micro_batches = 256;
  double total = 0, largest = 0;
  for (int i = 0; i < 1000; ++i) {
    const double t = time(rng);
    total += t;
    largest = std::max(largest, t);
    p.layers.push_back({.time = t, .cut_before = cut(rng), .fixed_bytes = 1000});
  }
  for (int s = 0; s < p.stages; ++s) p.live.push_back(p.stages - s);
  absl::StatusOr<PartitionChoice> choice = PartitionForStepTime(p);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_GE(choice->bottleneck, std::max(largest, total / p.stages) - 1e-9);
  EXPECT_LE(choice->bottleneck, total / p.stages + largest);  // a greedy split's bound
}

}  // namespace
}  // namespace gpipe
