// Faults injected into real jobs through gpipe-run: SIGKILL of a random rank at a random moment
// ends every rank, non-zero, within a bound, with a message naming the rank; SIGKILL during
// checkpointing (every step writes one) always leaves `latest` naming a complete checkpoint that
// loads and resumes. Counts and times are printed for the record.
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/ckpt/checkpoint_layout.h"
#include "runtime/ckpt/checkpoint_manifest.h"
#include "runtime/ckpt/checkpoint_reader.h"
#include "tests/support/process_runner.h"
#include "tests/support/process_tree.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kPlan[] = "tests/e2e/testdata/equivalence.pbtxt";
// How long after one rank dies every rank of the job must be gone (mpirun notices the death at
// once and ends the others with SIGTERM, then SIGKILL a second later).
constexpr double kEndBoundSeconds = 10.0;
constexpr int kKills = 20;

using testing::Alive;
using testing::WorkersOf;

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = scratch_.path(); }

  struct Killed {
    testing::ProcessResult result;
    bool sent = false;
    bool at_moment = false;      // `moment` held when the kill was sent
    int rank_index = -1;         // which of the job's workers (by pid order)
    double exit_seconds = 0;     // from the kill to gpipe-run's exit
    double gone_seconds = 0;     // from the kill until no worker of the job was left
    std::vector<pid_t> workers;  // the job's workers at the kill
  };

  // Runs gpipe-run with `args` and sends `signal` to one of its workers, chosen by `rng`, `delay`
  // seconds after the workers appear; with `moment`, at the first instant after that when it
  // holds (watched in a tight loop for up to 3 s).
  Killed RunAndKill(const std::vector<std::string>& args, double delay, std::mt19937& rng,
                    const std::function<bool()>& moment = nullptr, int signal = SIGKILL) {
    std::vector<std::string> argv = {testing::BinPath("gpipe-run"), testing::SourcePath(kPlan)};
    argv.insert(argv.end(), args.begin(), args.end());
    Killed killed;
    Clock::time_point seen{}, kill_time{};
    bool have_seen = false;
    killed.result = testing::RunProcess(argv, 120, [&](pid_t run, const std::string&) {
      if (killed.sent) return;
      std::vector<pid_t> workers = WorkersOf(run);
      if (workers.empty()) return;
      if (!have_seen) {
        have_seen = true;
        seen = Clock::now();
      }
      if (std::chrono::duration<double>(Clock::now() - seen).count() < delay) return;
      if (moment != nullptr) {
        const Clock::time_point until = Clock::now() + std::chrono::seconds(3);
        while (!(killed.at_moment = moment()) && Clock::now() < until) {
        }
      }
      std::sort(workers.begin(), workers.end());
      killed.rank_index = std::uniform_int_distribution<int>(0, workers.size() - 1)(rng);
      killed.workers = workers;
      ::kill(workers[killed.rank_index], signal);
      killed.sent = true;
      kill_time = Clock::now();
    });
    if (!killed.sent) return killed;
    const auto since_kill = [&] {
      return std::chrono::duration<double>(Clock::now() - kill_time).count();
    };
    killed.exit_seconds = since_kill();
    while (std::any_of(killed.workers.begin(), killed.workers.end(), Alive) &&
           since_kill() < 2 * kEndBoundSeconds) {
      ::usleep(10'000);
    }
    killed.gone_seconds = since_kill();
    return killed;
  }

  const testing::ScratchDir scratch_;  // this test's own, removed after it
  std::string dir_;
};

TEST_F(FaultTest, KillingAnyRankAtAnyMomentEndsEveryRankWithinTheBound) {
  std::mt19937 rng(20261126);
  double worst_exit = 0, worst_gone = 0;
  for (int i = 0; i < kKills; ++i) {
    const double delay = std::uniform_real_distribution<double>(0.0, 2.0)(rng);
    const Killed killed = RunAndKill(
        {"--override", "pipeline { stages: 4 } training { steps: 1000000 }"}, delay, rng);
    SCOPED_TRACE(absl::StrCat("kill ", i, " after ", delay, " s"));
    ASSERT_TRUE(killed.sent) << killed.result.output;
    EXPECT_FALSE(killed.result.timed_out) << killed.result.output;
    EXPECT_NE(killed.result.exit_code, 0) << killed.result.output;
    EXPECT_LE(killed.exit_seconds, kEndBoundSeconds) << killed.result.output;
    EXPECT_LE(killed.gone_seconds, kEndBoundSeconds) << killed.result.output;
    // The launcher names the rank that died.
    EXPECT_TRUE(absl::StrContains(killed.result.output, "exited on signal 9") ||
                absl::StrContains(killed.result.output, "killed by signal 9"))
        << killed.result.output;
    worst_exit = std::max(worst_exit, killed.exit_seconds);
    worst_gone = std::max(worst_gone, killed.gone_seconds);
  }
  std::printf(
      "[ faults ] %d ranks killed at random moments: every job exited non-zero at most "
      "%.2f s after the kill and every rank was gone within %.2f s (bound %.0f s)\n",
      kKills, worst_exit, worst_gone, kEndBoundSeconds);
}

// A rank that stops answering (SIGSTOP: a hung process, a frozen node) at a random moment,
// start-up included, is found by the others' wait deadlines or by the start-up watchdog (MPI_Init
// has no limit of its own): the job ends non-zero within the deadline and the launcher's
// teardown.
TEST_F(FaultTest, AHungRankIsFoundByTheDeadlinesAndTheJobEnds) {
  std::mt19937 rng(11);
  constexpr double kWaitSeconds = 3;
  double worst = 0;
  for (int i = 0; i < 5; ++i) {
    const double delay = std::uniform_real_distribution<double>(0.2, 1.5)(rng);
    const Killed stopped = RunAndKill(
        {"--override", "pipeline { stages: 3 } training { steps: 1000000 }", "--override",
         absl::StrCat("runtime { timeouts { wait_seconds: ", kWaitSeconds,
                      " startup_seconds: ", kWaitSeconds, " } }")},
        delay, rng, nullptr, SIGSTOP);
    SCOPED_TRACE(absl::StrCat("SIGSTOP ", i, " after ", delay, " s"));
    ASSERT_TRUE(stopped.sent) << stopped.result.output;
    EXPECT_FALSE(stopped.result.timed_out) << stopped.result.output;
    EXPECT_NE(stopped.result.exit_code, 0) << stopped.result.output;
    EXPECT_LE(stopped.exit_seconds, kWaitSeconds + kEndBoundSeconds) << stopped.result.output;
    EXPECT_LE(stopped.gone_seconds, kWaitSeconds + kEndBoundSeconds) << stopped.result.output;
    // Frozen mid-run: the peers' waits say so; frozen while starting: the start-up watchdog.
    EXPECT_TRUE(absl::StrContains(stopped.result.output, "no progress after 3.0s") ||
                absl::StrContains(stopped.result.output, "did not complete within 3s"))
        << stopped.result.output;
    worst = std::max(worst, stopped.gone_seconds);
  }
  std::printf("[ faults ] 5 ranks frozen (SIGSTOP) with wait_seconds %.0f: every job ended and "
              "every rank was gone within %.2f s\n",
              kWaitSeconds, worst);
}

TEST_F(FaultTest, KillsDuringCheckpointingAlwaysLeaveOneThatResumes) {
  std::mt19937 rng(7);
  const std::string ckpt = dir_ + "/ckpt";
  const std::string section =
      absl::StrCat("checkpoint { dir: \"", ckpt, "\" every_steps: 1 keep_last: 2 }");
  int during = 0;  // kills sent while a checkpoint was being written
  int64_t previous = -1;
  // A checkpoint is being written: a step directory without its manifest.
  const auto writing = [&ckpt] {
    for (const CheckpointEntry& entry : ListCheckpoints(ckpt)) {
      if (!entry.complete) return true;
    }
    return false;
  };
  for (int i = 0; i < kKills; ++i) {
    std::vector<std::string> args = {"--override", "pipeline { stages: 2 }",
                                     "--override", "training { steps: 1000000 }",
                                     "--override", section};
    if (fs::exists(ckpt + "/latest")) args.insert(args.end(), {"--resume", "latest"});
    const double delay = std::uniform_real_distribution<double>(0.2, 1.5)(rng);
    const Killed killed = RunAndKill(args, delay, rng, writing);
    SCOPED_TRACE(absl::StrCat("kill ", i, " after ", delay, " s"));
    ASSERT_TRUE(killed.sent) << killed.result.output;
    ASSERT_FALSE(killed.result.timed_out) << killed.result.output;
    if (killed.at_moment) ++during;
    ASSERT_NE(killed.result.exit_code, 0) << killed.result.output;
    // Whatever was being written, `latest` names a complete checkpoint whose every shard loads.
    absl::StatusOr<std::string> latest = ReadLatestCheckpoint(ckpt);
    if (!latest.ok() && previous < 0) continue;  // killed before the first checkpoint
    ASSERT_TRUE(latest.ok()) << latest.status();
    absl::StatusOr<pb::CheckpointManifest> manifest = ReadCheckpointManifest(*latest);
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    std::vector<std::string> names;
    for (const pb::CheckpointTensor& t : manifest->tensors()) names.push_back(t.name());
    const absl::Status read = ReadCheckpointTensors(*latest, *manifest, names).status();
    ASSERT_TRUE(read.ok()) << read;
    EXPECT_GE(manifest->step(), previous);
    previous = manifest->step();
  }
  EXPECT_GE(during, kKills / 2) << "too few kills landed while a checkpoint was written";
  ASSERT_GE(previous, 1);
  // The last checkpoint resumes and finishes.
  const testing::ProcessResult finish =
      testing::RunProcess({testing::BinPath("gpipe-run"), testing::SourcePath(kPlan), "--override",
                           "pipeline { stages: 2 }", "--override",
                           absl::StrCat("training { steps: ", previous + 2, " }"), "--override",
                           section, "--resume", "latest"},
                          120);
  EXPECT_EQ(finish.exit_code, 0) << finish.output;
  std::printf(
      "[ faults ] %d ranks killed, %d of them while a checkpoint was being written; "
      "`latest` always named a complete checkpoint that loaded, and the last (step %lld) "
      "resumed and finished\n",
      kKills, during, static_cast<long long>(previous));
}

}  // namespace
}  // namespace gpipe
