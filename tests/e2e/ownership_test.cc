// A run owns its files (issue 27), through the real programs: no output may be a file the run
// reads, another output, or anything in a checkpoint directory; one job per checkpoint.dir, held
// by a lock; a run without --resume does not take over another run's checkpoints; a resumed run
// says how its plan differs and refuses other data or a hand-edited manifest.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/ckpt/checkpoint_lock.h"
#include "tests/support/file_fixtures.h"
#include "tests/support/process_runner.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;
using testing::ProcessResult;

constexpr char kPlan[] = R"pb(
  name: "ownership"
  model {
    input { shape: [ 12 ] }
    layers {
      name: "fc1"
      linear { out_features: 16 }
    }
    layers {
      name: "fc2"
      linear { out_features: 5 }
    }
    loss { softmax_cross_entropy {} }
  }
  pipeline { stages: 1 micro_batches: 2 }
  training {
    global_batch: 8
    steps: 2
    optimizer { sgd { lr: 0.1 } }
  }
  data { synthetic { num_samples: 64 } }
  runtime {
    log_every: 0
    timeouts { wait_seconds: 30 startup_seconds: 30 }
  }
)pb";

class OwnershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshTempDir();
    plan_ = Path("plan.pbtxt");
    testing::WriteFile(plan_, kPlan);
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string Checkpoint(int every_steps = 1) const {
    return absl::StrCat("checkpoint { dir: \"", Path("ckpt"), "\" every_steps: ", every_steps,
                        " }");
  }

  // gpipe-worker on one rank with `args`.
  ProcessResult Worker(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = testing::MpirunPrefix(1);
    argv.insert(argv.end(), {testing::BinPath("gpipe-worker"), "--plan", plan_});
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunProcess(argv, 120);
  }

  // A finished run with checkpoints after every step into ckpt/.
  void TrainWithCheckpoints(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = {"--override", Checkpoint()};
    args.insert(args.end(), extra.begin(), extra.end());
    const ProcessResult run = Worker(args);
    ASSERT_EQ(run.exit_code, 0) << run.output;
  }

  std::string dir_, plan_;
};

TEST_F(OwnershipTest, AnOutputOnTheRunsPlanIsRefusedAndThePlanKept) {
  std::filesystem::create_hard_link(plan_, Path("plan-link.pbtxt"));
  for (const std::string flag : {"--export", "--metrics-out", "--trace"}) {
    for (const std::string& target : {plan_, Path("plan-link.pbtxt")}) {
      SCOPED_TRACE(absl::StrCat(flag, " ", target));
      const ProcessResult run = Worker({flag, target});
      EXPECT_EQ(run.exit_code, 1) << run.output;
      EXPECT_TRUE(absl::StrContains(
          run.output, absl::StrCat(flag, " ", target, " is the same file as the plan")))
          << run.output;
      EXPECT_EQ(testing::ReadFile(plan_), kPlan);
    }
  }
}

TEST_F(OwnershipTest, TwoOutputsOnOneFileAreRefused) {
  const ProcessResult run = Worker({"--export", Path("out"), "--metrics-out", Path("./out")});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "--metrics-out and --export name the same file"))
      << run.output;
  EXPECT_FALSE(fs::exists(Path("out")));
}

TEST_F(OwnershipTest, OutputsIntoTheCheckpointDirectoryAreRefusedAndItsCheckpointsKept) {
  TrainWithCheckpoints();
  const std::string latest = testing::ReadFile(Path("ckpt/latest"));
  const std::string shard = Path("ckpt/step-000000002/stage-000-of-001.safetensors");
  const std::string shard_bytes = testing::ReadFile(shard);
  for (const std::string& target : {Path("ckpt/latest"), shard, Path("ckpt/new.safetensors")}) {
    SCOPED_TRACE(target);
    const ProcessResult run =
        Worker({"--override", Checkpoint(), "--resume", "latest", "--export", target});
    EXPECT_EQ(run.exit_code, 1) << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, "is inside checkpoint.dir")) << run.output;
  }
  EXPECT_EQ(testing::ReadFile(Path("ckpt/latest")), latest);
  EXPECT_EQ(testing::ReadFile(shard), shard_bytes);
}

TEST_F(OwnershipTest, PlanBalanceMayNotWriteOverItsPlan) {
  const ProcessResult run = testing::RunProcess(
      {testing::BinPath("gpipe-plan"), "balance", plan_, "--stages", "2", "-o", plan_}, 60);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "-o " + plan_ + " is the same file as the plan"))
      << run.output;
  EXPECT_EQ(testing::ReadFile(plan_), kPlan);
}

TEST_F(OwnershipTest, ASecondJobOnALockedCheckpointDirectoryIsRefusedNamingTheHolder) {
  absl::StatusOr<CheckpointDirLock> held = CheckpointDirLock::Acquire(Path("ckpt"));
  ASSERT_TRUE(held.ok()) << held.status();
  const ProcessResult run = Worker({"--override", Checkpoint()});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "is in use by another job")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, absl::StrCat("pid=", ::getpid()))) << run.output;
  EXPECT_FALSE(fs::exists(Path("ckpt/step-000000001")));
}

TEST_F(OwnershipTest, ARunWithoutResumeDoesNotTakeOverAnEarlierRunsCheckpoints) {
  TrainWithCheckpoints();
  const std::string latest = testing::ReadFile(Path("ckpt/latest"));
  const ProcessResult refused =
      Worker({"--override", Checkpoint(), "--override", "training { steps: 1 }"});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_TRUE(absl::StrContains(refused.output, "step-000000002")) << refused.output;
  EXPECT_TRUE(absl::StrContains(refused.output, "--resume latest")) << refused.output;
  EXPECT_TRUE(absl::StrContains(refused.output, "--start-over")) << refused.output;
  EXPECT_EQ(testing::ReadFile(Path("ckpt/latest")), latest);

  // Starting over: the old checkpoints go once the new run's first one is complete.
  const ProcessResult over =
      Worker({"--override", Checkpoint(), "--override", "training { steps: 1 }", "--start-over"});
  ASSERT_EQ(over.exit_code, 0) << over.output;
  EXPECT_EQ(testing::ReadFile(Path("ckpt/latest")), "step-000000001\n");
  EXPECT_FALSE(fs::exists(Path("ckpt/step-000000002")));
}

TEST_F(OwnershipTest, StartingOverKeepsTheEarlierCheckpointsUntilItsOwnFirstOne) {
  TrainWithCheckpoints();
  // Starts over, then fails before its first step: parameters it cannot load.
  testing::WriteFile(Path("bad.safetensors"), "not safetensors");
  const ProcessResult failed =
      Worker({"--override", Checkpoint(), "--start-over", "--init-from", Path("bad.safetensors")});
  EXPECT_EQ(failed.exit_code, 1) << failed.output;
  EXPECT_EQ(testing::ReadFile(Path("ckpt/latest")), "step-000000002\n");
  EXPECT_TRUE(fs::exists(Path("ckpt/step-000000001/manifest.pbtxt")));
  EXPECT_TRUE(fs::exists(Path("ckpt/step-000000002/manifest.pbtxt")));
}

TEST_F(OwnershipTest, ResumingFromElsewhereIntoAnotherRunsDirectoryIsRefused) {
  TrainWithCheckpoints();
  fs::rename(Path("ckpt"), Path("other"));
  TrainWithCheckpoints();  // a second run's checkpoints in ckpt/
  const ProcessResult run = Worker({"--override", Checkpoint(), "--override",
                                    "training { steps: 3 }", "--resume", Path("other")});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "outside it")) << run.output;
  EXPECT_EQ(testing::ReadFile(Path("ckpt/latest")), "step-000000002\n");
}

TEST_F(OwnershipTest, ACheckpointWhoseManifestDoesNotReadStillCounts) {
  TrainWithCheckpoints();
  for (const char* step : {"step-000000001", "step-000000002"}) {
    testing::WriteFile(Path(absl::StrCat("ckpt/", step, "/manifest.pbtxt")),
                       "format_version: 99\n");
  }
  const ProcessResult run = Worker({"--override", Checkpoint()});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "whose manifest gpipe cannot read")) << run.output;
  EXPECT_TRUE(fs::exists(Path("ckpt/step-000000002/manifest.pbtxt")));
}

TEST_F(OwnershipTest, TheRunningJobHoldsItsCheckpointDirectoryLock) {
  bool tried = false;
  absl::Status while_running;
  std::vector<std::string> argv = testing::MpirunPrefix(1);
  argv.insert(argv.end(),
              {testing::BinPath("gpipe-worker"), "--plan", plan_, "--override", Checkpoint(1000),
               "--override", "training { steps: 2000 } runtime { log_every: 1 }"});
  const ProcessResult run = testing::RunProcess(argv, 120, [&](pid_t, const std::string& output) {
    if (!tried && absl::StrContains(output, "step 3/2000")) {
      tried = true;
      while_running = CheckpointDirLock::Acquire(Path("ckpt")).status();
    }
  });
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_TRUE(tried) << run.output;
  EXPECT_TRUE(absl::StrContains(while_running.message(), "is in use by another job"))
      << while_running;
  EXPECT_TRUE(CheckpointDirLock::Acquire(Path("ckpt")).ok());  // released with the job
}

TEST_F(OwnershipTest, AResumedRunNamesEveryChangeOfItsPlan) {
  TrainWithCheckpoints();
  const ProcessResult run = Worker({"--override", Checkpoint(), "--resume", "latest", "--override",
                                    "training { steps: 3 optimizer { sgd { lr: 0.05 } } }"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "resuming with training.steps 3 (checkpoint: 2)"))
      << run.output;
  EXPECT_TRUE(absl::StrContains(run.output,
                                "resuming with training.optimizer.sgd.lr 0.05 (checkpoint: 0.1)"))
      << run.output;
}

TEST_F(OwnershipTest, ResumingOnOtherDataIsRefused) {
  TrainWithCheckpoints();
  const ProcessResult run = Worker({"--override", Checkpoint(), "--resume", "latest", "--override",
                                    "training { steps: 3 } data { synthetic { noise: 0.25 } }"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "the checkpoint was taken on other data"))
      << run.output;
}

TEST_F(OwnershipTest, AHandEditedManifestIsRefused) {
  TrainWithCheckpoints();
  const std::string manifest = Path("ckpt/step-000000002/manifest.pbtxt");
  std::string text = testing::ReadFile(manifest);
  const size_t at = text.find("applied_steps: 2");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 16, "applied_steps: 1");
  testing::WriteFile(manifest, text);
  const ProcessResult run = Worker(
      {"--override", Checkpoint(), "--resume", "latest", "--override", "training { steps: 3 }"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "checksum")) << run.output;
}

TEST_F(OwnershipTest, AMissingCheckpointDirectoryIsCreatedWithItsParents) {
  const ProcessResult run =
      Worker({"--override",
              absl::StrCat("checkpoint { dir: \"", Path("a/b/ckpt"), "\" every_steps: 2 }")});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(testing::ReadFile(Path("a/b/ckpt/latest")), "step-000000002\n");
}

TEST_F(OwnershipTest, ALatestThatIsASymlinkIsRefusedUpFrontAndNotWrittenThrough) {
  fs::create_directories(Path("ckpt"));
  testing::WriteFile(Path("elsewhere"), "keep me\n");
  fs::create_symlink(Path("elsewhere"), Path("ckpt/latest"));
  const ProcessResult run = Worker({"--override", Checkpoint(), "--start-over"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "latest is a symbolic link")) << run.output;
  EXPECT_EQ(testing::ReadFile(Path("elsewhere")), "keep me\n");
  EXPECT_FALSE(fs::exists(Path("ckpt/step-000000001")));
}

}  // namespace
}  // namespace gpipe
