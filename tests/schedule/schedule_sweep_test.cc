// The exhaustive sweep: every schedule kind's program for every K in 1..64, M in 1..256 (and
// v in 2..4 for INTERLEAVED_1F1B, where K >= 2; v = 2 for the V schedules; the chunked kinds up
// to M = 64, and INTERLEAVED_1F1B's full groups, M a multiple of K, up to 256) is built and passes
// VerifyProgram; the zero-bubble schedules also reach their unit-cost makespan, 3M+K-1 for
// M >= K and 2K+2M-1 for M < K, and ZB-H1 holds min(K, M) micro-batches on every stage. Slow
// (minutes of CPU), so it is its own binary with the ctest label `sweep`; the kinds are swept on
// one thread each, as many at once as the machine has cores, and each prints how many programs it
// verified and how long that took.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/schedule/build_program.h"
#include "runtime/schedule/schedule_shape.h"
#include "runtime/schedule/verifier.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::ShapeName;
using ::gpipe::schedule::testing::VirtualStagesToTry;

constexpr int kMaxStages = 64;
constexpr int kMaxMicroBatches = 256;
// Chunked kinds hold v times the instructions: every M up to 64, and for INTERLEAVED_1F1B the
// multiples of K beyond (its full groups), keep the sweep to minutes.
constexpr int kMaxChunkedMicroBatches = 64;

bool Chunked(pb::Schedule kind) {
  return kind == pb::INTERLEAVED_1F1B || kind == pb::ZERO_BUBBLE_V || kind == pb::DUALPIPE_V;
}

// Whether the sweep covers (kind, K, M): every shape CheckScheduleShape must accept.
bool InSweep(pb::Schedule kind, int k, int m) {
  if (kind == pb::INTERLEAVED_1F1B && k < 2) return false;
  if (!Chunked(kind) || m <= kMaxChunkedMicroBatches) return true;
  return kind == pb::INTERLEAVED_1F1B && m % k == 0;
}

// Shapes of `kind` in the sweep, counted from the rules in schedule_shape.h rather than by
// asking CheckScheduleShape (which must accept each of them), so a rule that wrongly refuses
// shapes fails the sweep.
long long ExpectedShapes(pb::Schedule kind) {
  if (!Chunked(kind)) return static_cast<long long>(kMaxStages) * kMaxMicroBatches;
  if (kind != pb::INTERLEAVED_1F1B) {
    return static_cast<long long>(kMaxStages) * kMaxChunkedMicroBatches;
  }
  long long shapes = 0;
  for (int k = 2; k <= kMaxStages; ++k) {
    shapes += kMaxChunkedMicroBatches + kMaxMicroBatches / k - kMaxChunkedMicroBatches / k;
  }
  return shapes * static_cast<long long>(VirtualStagesToTry(kind).size());
}

// "" when a zero-bubble result has the makespan (and, for ZB-H1, the peaks) the builder's
// header states; else what differs. Other kinds: "".
std::string ZeroBubbleMismatch(pb::Schedule kind, int k, int m, const VerifyResult& result) {
  if (kind != pb::ZERO_BUBBLE_H1 && kind != pb::ZERO_BUBBLE_H2) return "";
  const double makespan = m >= k ? 3.0 * m + k - 1 : 2.0 * k + 2 * m - 1;
  if (result.makespan != makespan) {
    return ShapeName(kind, k, m) + ": makespan " + std::to_string(result.makespan) + ", expected " +
           std::to_string(makespan);
  }
  if (kind == pb::ZERO_BUBBLE_H1 &&
      result.peak_live_activations != std::vector<int>(k, std::min(k, m))) {
    return ShapeName(kind, k, m) + ": a stage's peak live micro-batches is not min(K, M)";
  }
  return "";
}

// What sweeping one kind found: "" and the counts when every shape verified, else the first
// failure.
struct KindSweep {
  std::string failure;
  long long verified = 0;
  long long instructions = 0;
  double seconds = 0;
};

// Builds and verifies every shape of `kind` in the sweep, up to the first failure. Uses no gtest
// assertion, so it may run on any thread.
KindSweep SweepKind(pb::Schedule kind) {
  const auto start = std::chrono::steady_clock::now();
  KindSweep sweep;
  for (int k = 1; k <= kMaxStages && sweep.failure.empty(); ++k) {
    for (int m = 1; m <= kMaxMicroBatches && sweep.failure.empty(); ++m) {
      if (!InSweep(kind, k, m)) continue;
      for (int v : VirtualStagesToTry(kind)) {
        if (const absl::Status shape = CheckScheduleShape(kind, k, m, v); !shape.ok()) {
          sweep.failure = ShapeName(kind, k, m, v) + ": refused: " + shape.ToString();
          break;
        }
        const absl::StatusOr<Program> program = BuildProgram(kind, k, m, v);
        if (!program.ok()) {
          sweep.failure = ShapeName(kind, k, m, v) + ": " + program.status().ToString();
          break;
        }
        const absl::StatusOr<VerifyResult> result = VerifyProgram(*program, OpCosts{});
        if (!result.ok()) {
          sweep.failure = ShapeName(kind, k, m, v) + ": " + result.status().ToString();
          break;
        }
        sweep.failure = ZeroBubbleMismatch(kind, k, m, *result);
        if (!sweep.failure.empty()) break;
        ++sweep.verified;
        for (const StageProgram& stage : program->stage_programs) {
          sweep.instructions += static_cast<long long>(stage.instructions.size());
        }
      }
    }
  }
  sweep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sweep;
}

TEST(ScheduleSweepTest, EveryKindVerifiesForEveryShapeUpTo64StagesAnd256MicroBatches) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<pb::Schedule> kinds = AllSchedules();
  std::vector<KindSweep> sweeps(kinds.size());
  // Workers take the kinds in order, the biggest (interleaved's) among the first.
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next++; i < kinds.size(); i = next++) sweeps[i] = SweepKind(kinds[i]);
  };
  const size_t workers = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, kinds.size());
  std::vector<std::thread> threads;
  for (size_t w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (std::thread& thread : threads) thread.join();

  long long total = 0;
  for (size_t i = 0; i < kinds.size(); ++i) {
    const KindSweep& sweep = sweeps[i];
    EXPECT_EQ(sweep.failure, "") << pb::Schedule_Name(kinds[i]);
    if (!sweep.failure.empty()) continue;
    EXPECT_EQ(sweep.verified, ExpectedShapes(kinds[i])) << pb::Schedule_Name(kinds[i]);
    total += sweep.verified;
    std::printf("%-16s verified %6lld programs (%10lld instructions) in %6.1f s\n",
                pb::Schedule_Name(kinds[i]).c_str(), sweep.verified, sweep.instructions,
                sweep.seconds);
  }
  std::printf("all kinds: verified %lld programs in %.1f s on %zu threads\n", total,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              workers);
}

}  // namespace
}  // namespace gpipe::schedule
