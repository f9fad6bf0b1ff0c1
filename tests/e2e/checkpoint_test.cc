// Checkpoints through real jobs (tests/e2e/testdata/equivalence.pbtxt: dropout, layer norm, SGD
// with Nesterov momentum): a resumed run continues bit for bit (weights and every step's loss),
// also under another stage count or replica count; resumes that cannot continue are refused
// naming why; outputs are checked before the first step; a run that applies no update fails; a
// signal to gpipe-run stops every rank at a step boundary with a checkpoint and exit code 3.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/core/file_io.h"
#include "tests/e2e/equivalence_harness.h"
#include "tests/support/process_runner.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;
using testing::ProcessResult;
using testing::Weights;

constexpr char kPlan[] = "tests/e2e/testdata/equivalence.pbtxt";
constexpr char kAdam[] = "training { optimizer { adam { lr: 0.01 weight_decay: 0.01 } } }";

class CheckpointJobTest : public testing::EquivalenceHarness {
 protected:
  void SetUp() override { dir_ = scratch_.path(); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  // The plan's checkpoint section, into dir_/ckpt.
  std::string Checkpoint(int every_steps) const {
    return absl::StrCat("checkpoint { dir: \"", Path("ckpt"), "\" every_steps: ", every_steps,
                        " }");
  }

  // gpipe-worker on `stages` x `replicas` ranks with `args` (flags and --override's).
  ProcessResult Worker(int stages, int replicas, const std::vector<std::string>& args,
                       const std::string& plan = "") {
    std::vector<std::string> argv = testing::MpirunPrefix(stages * replicas);
    argv.insert(argv.end(), {testing::BinPath("gpipe-worker"), "--plan",
                             plan.empty() ? testing::SourcePath(kPlan) : plan, "--override",
                             absl::StrCat("pipeline { stages: ", stages, " data_parallel: ",
                                          replicas, " micro_batches: ", 4 / replicas, " }")});
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunProcess(argv, 180);
  }

  static Weights Read(const std::string& path) { return ReadWeights(path); }

  // The "loss" field of every training record of a metrics file, as written.
  static std::vector<std::string> Losses(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> losses;
    for (std::string line; std::getline(in, line);) {
      if (absl::StrContains(line, "\"eval\"")) continue;
      const size_t at = line.find("\"loss\":");
      if (at == std::string::npos) continue;
      losses.push_back(line.substr(at, line.find_first_of(",}", at) - at));
    }
    return losses;
  }

  const testing::ScratchDir scratch_;  // this test's own, removed after it
  std::string dir_;
};

TEST_F(CheckpointJobTest, ResumedRunIsBitIdenticalToTheUninterruptedOne) {
  for (const std::string& optimizer : {std::string(), std::string(kAdam)}) {
    SCOPED_TRACE(optimizer.empty() ? "sgd" : "adam");
    fs::remove_all(Path("ckpt"));
    std::vector<std::string> common;
    if (!optimizer.empty()) common = {"--override", optimizer};
    const auto with = [&](std::vector<std::string> args) {
      args.insert(args.begin(), common.begin(), common.end());
      return args;
    };
    const ProcessResult whole =
        Worker(2, 1,
               with({"--override", "training { steps: 6 }", "--export", Path("whole.st"),
                     "--metrics-out", Path("whole.jsonl")}));
    ASSERT_EQ(whole.exit_code, 0) << whole.output;
    // The first half, checkpointed after step 3; then the rest from `latest`.
    const ProcessResult first = Worker(2, 1,
                                       with({"--override", "training { steps: 3 }", "--override",
                                             Checkpoint(3), "--metrics-out", Path("parts.jsonl")}));
    ASSERT_EQ(first.exit_code, 0) << first.output;
    EXPECT_TRUE(absl::StrContains(first.output, "checkpoint: saved")) << first.output;
    EXPECT_EQ(*ReadWholeFile(Path("ckpt/latest")), "step-000000003\n");
    const ProcessResult rest = Worker(
        2, 1,
        with({"--override", "training { steps: 6 }", "--override", Checkpoint(3), "--resume",
              "latest", "--export", Path("resumed.st"), "--metrics-out", Path("parts.jsonl")}));
    ASSERT_EQ(rest.exit_code, 0) << rest.output;
    EXPECT_TRUE(absl::StrContains(rest.output, "resuming after step 3")) << rest.output;
    ExpectBitIdentical(Read(Path("resumed.st")), Read(Path("whole.st")));
    // Every step's loss too (the metrics of the resumed run are appended to the first part's).
    EXPECT_EQ(Losses(Path("parts.jsonl")), Losses(Path("whole.jsonl")));
    EXPECT_EQ(Losses(Path("whole.jsonl")).size(), 6u);
    EXPECT_EQ(*ReadWholeFile(Path("ckpt/latest")), "step-000000006\n");
  }
}

TEST_F(CheckpointJobTest, CheckpointResumesUnderOtherStageAndReplicaCounts) {
  const ProcessResult whole =
      Worker(4, 1, {"--override", "training { steps: 6 }", "--export", Path("whole.st")});
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const ProcessResult first =
      Worker(4, 1, {"--override", "training { steps: 3 }", "--override", Checkpoint(3)});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // Losing machines: 4 stages become 2 or 1; the checkpoint is keyed by tensor names.
  for (int stages : {2, 1}) {
    const std::string out = Path(absl::StrCat("k", stages, ".st"));
    const ProcessResult rest = Worker(stages, 1,
                                      {"--override", "training { steps: 6 }", "--resume",
                                       Path("ckpt/step-000000003"), "--export", out});
    ASSERT_EQ(rest.exit_code, 0) << rest.output;
    SCOPED_TRACE(absl::StrCat(stages, " stages"));
    ExpectBitIdentical(Read(out), Read(Path("whole.st")));
  }
  // Two replicas of two stages: the same update up to the all-reduce's summation order.
  const ProcessResult replicated =
      Worker(2, 2,
             {"--override", "training { steps: 6 }", "--resume", Path("ckpt/step-000000003"),
              "--export", Path("2x2.st")});
  ASSERT_EQ(replicated.exit_code, 0) << replicated.output;
  ExpectClose(Read(Path("2x2.st")), Read(Path("whole.st")), 1e-6);
  // And a checkpoint written by two replicas (replica 0's ranks write) resumes on one process.
  fs::remove_all(Path("ckpt"));
  ASSERT_EQ(
      Worker(2, 2, {"--override", "training { steps: 3 }", "--override", Checkpoint(3)}).exit_code,
      0);
  const ProcessResult single =
      Worker(1, 1,
             {"--override", "training { steps: 6 }", "--override", Checkpoint(3), "--resume",
              "latest", "--export", Path("from2x2.st")});
  ASSERT_EQ(single.exit_code, 0) << single.output;
  ExpectClose(Read(Path("from2x2.st")), Read(Path("whole.st")), 1e-6);
}

TEST_F(CheckpointJobTest, ResumesThatCannotContinueAreRefusedSayingWhy) {
  ASSERT_EQ(
      Worker(2, 1, {"--override", "training { steps: 3 }", "--override", Checkpoint(3)}).exit_code,
      0);
  const auto refused = [&](std::vector<std::string> args, const std::string& expected,
                           const std::string& plan = "") {
    args.insert(args.end(), {"--override", Checkpoint(3), "--resume", "latest"});
    const ProcessResult run = Worker(2, 1, args, plan);
    EXPECT_NE(run.exit_code, 0) << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, expected)) << "expected: " << expected << "\n"
                                                         << run.output;
    EXPECT_FALSE(absl::StrContains(run.output, "step 4/")) << run.output;
  };
  refused({"--override", "training { steps: 2 }"}, "raise training.steps to continue");
  refused({"--override", "training { steps: 6 global_batch: 16 }"},
          "training.global_batch is 16 but the checkpoint was taken with 32");
  refused({"--override", "training { steps: 6 seed: 8 }"},
          "training.seed is 8 but the checkpoint was taken with 7");
  refused({"--override", "training { steps: 6 }", "--override", kAdam},
          "training.optimizer is adam but the checkpoint was taken with sgd");
  // Another model: fc3 wider than the checkpoint's.
  std::string text = *ReadWholeFile(testing::SourcePath(kPlan));
  const std::string wider = Path("wider.pbtxt");
  std::ofstream(wider) << absl::StrReplaceAll(text,
                                              {{"out_features: 16 bias", "out_features: 17 bias"}});
  refused({"--override", "training { steps: 6 }"},
          "rank 1 (stage 1): parameter 'fc3.weight' has shape [16, 24], expected [17, 24]", wider);
  std::ofstream(Path("x.st")) << "";
  refused({"--override", "training { steps: 6 }", "--init-from", Path("x.st")},
          "--init-from and --resume exclude each other");
  // A damaged shard, found before any step.
  const std::string shard = Path("ckpt/step-000000003/stage-001-of-002.safetensors");
  std::string bytes = *ReadWholeFile(shard);
  bytes[bytes.size() / 2] ^= 1;
  std::ofstream(shard, std::ios::binary) << bytes;
  refused({"--override", "training { steps: 6 }"}, absl::StrCat(shard, " is corrupt: CRC-32"));
  fs::remove(shard);
  refused({"--override", "training { steps: 6 }"}, absl::StrCat(shard, " is missing"));
  fs::remove(Path("ckpt/step-000000003/manifest.pbtxt"));
  refused({"--override", "training { steps: 6 }"}, "is not a complete checkpoint");
}

TEST_F(CheckpointJobTest, OutputsAreCheckedBeforeTheFirstStep) {
  const auto refused = [&](const std::vector<std::string>& args, const std::string& expected) {
    const ProcessResult run = Worker(2, 1, args);
    EXPECT_NE(run.exit_code, 0) << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, expected)) << "expected: " << expected << "\n"
                                                         << run.output;
    EXPECT_FALSE(absl::StrContains(run.output, "step 1/")) << run.output;
  };
  fs::create_directories(Path("a_directory"));
  refused({"--export", Path("a_directory")}, "is a directory; gpipe replaces only regular files");
  refused({"--metrics-out", "/dev/null"}, "/dev/null is a character device");
  ASSERT_EQ(::mkfifo(Path("fifo").c_str(), 0644), 0);
  refused({"--trace", Path("fifo")}, "is a FIFO");
  refused({"--export", Path("missing/out.st")}, "does not exist");
  std::ofstream(Path("plain")) << "x";
  refused({"--override", absl::StrCat("checkpoint { dir: \"", Path("plain"), "\" }")},
          "is a regular file, not a directory");
  refused({"--override", "checkpoint { every_steps: 2 }"}, "checkpoint: has no dir");
  // The special files are still what they were.
  EXPECT_TRUE(fs::is_fifo(Path("fifo")));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST_F(CheckpointJobTest, RunsThatApplyNoUpdateFailAndSkipsInARowStop) {
  // Weights whose every step is non-finite: fc1.weight all NaN.
  ASSERT_EQ(
      Worker(1, 1, {"--override", "training { steps: 1 }", "--export", Path("w.st")}).exit_code, 0);
  absl::StatusOr<std::vector<NamedTensorData>> weights = ReadSafetensors(Path("w.st"));
  ASSERT_TRUE(weights.ok());
  for (NamedTensorData& t : *weights) {
    if (t.name == "fc1.weight") std::fill(t.values.begin(), t.values.end(), NAN);
  }
  ASSERT_TRUE(WriteSafetensors(Path("nan.st"), *weights, {}).ok());
  const ProcessResult none = Worker(2, 1,
                                    {"--init-from", Path("nan.st"), "--export", Path("out.st"),
                                     "--override", "training { steps: 4 max_skipped_steps: 0 }"});
  EXPECT_EQ(none.exit_code, 1) << none.output;
  EXPECT_TRUE(absl::StrContains(none.output, "no step applied an update: all 4 steps were skipped"))
      << none.output;
  EXPECT_TRUE(absl::StrContains(none.output,
                                "step 3 skipped on every rank: non-finite loss or "
                                "gradients on rank 0 (stage 0), rank 1 (stage 1)"))
      << none.output;
  EXPECT_FALSE(fs::exists(Path("out.st")));
  const ProcessResult limited = Worker(
      2, 1,
      {"--init-from", Path("nan.st"), "--override", "training { steps: 50 max_skipped_steps: 3 }"});
  EXPECT_EQ(limited.exit_code, 1) << limited.output;
  EXPECT_TRUE(absl::StrContains(limited.output, "the last 3 steps were all skipped"))
      << limited.output;
  EXPECT_FALSE(absl::StrContains(limited.output, "step 4/")) << limited.output;
}

// gpipe-run in the foreground of a terminal: Ctrl-C reaches gpipe-run, which asks every rank to
// stop; they finish the step, save a checkpoint and exit 3; the resumed run ends where the
// uninterrupted one does.
TEST_F(CheckpointJobTest, SignalToGpipeRunStopsWithACheckpointAndResumes) {
  const std::vector<std::string> run = {testing::BinPath("gpipe-run"),
                                        testing::SourcePath(kPlan),
                                        "--override",
                                        "pipeline { stages: 2 }",
                                        "--override",
                                        "training { steps: 400 } runtime { log_every: 1 }"};
  std::vector<std::string> whole = run;
  whole.insert(whole.end(), {"--export", Path("whole.st")});
  const ProcessResult uninterrupted = testing::RunProcess(whole, 300);
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.output;

  std::vector<std::string> interrupted = run;
  interrupted.insert(interrupted.end(), {"--override", Checkpoint(0), "--export", Path("never.st"),
                                         "--trace", Path("stopped.json")});
  bool sent = false;
  const ProcessResult stopped =
      testing::RunProcess(interrupted, 300, [&sent](pid_t pid, const std::string& output) {
        if (!sent && absl::StrContains(output, "step 5/400")) {
          sent = true;
          ::kill(pid, SIGINT);
        }
      });
  ASSERT_TRUE(sent) << stopped.output;
  ASSERT_EQ(stopped.exit_code, 3) << stopped.output;
  EXPECT_TRUE(absl::StrContains(stopped.output, "asking every rank to stop")) << stopped.output;
  EXPECT_TRUE(absl::StrContains(stopped.output, "checkpoint: saved")) << stopped.output;
  EXPECT_TRUE(absl::StrContains(stopped.output, "continue with --resume latest")) << stopped.output;
  EXPECT_FALSE(absl::StrContains(stopped.output, "step 400/400")) << stopped.output;
  EXPECT_FALSE(fs::exists(Path("never.st")));
  // The trace of the steps that ran is written, as at a normal end.
  EXPECT_TRUE(absl::StrContains(stopped.output, "wrote the trace to")) << stopped.output;
  EXPECT_GT(fs::file_size(Path("stopped.json")), 1000u);

  std::vector<std::string> resume = run;
  resume.insert(resume.end(), {"--override", Checkpoint(0), "--resume", "latest", "--export",
                               Path("resumed.st")});
  const ProcessResult resumed = testing::RunProcess(resume, 300);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  ExpectBitIdentical(Read(Path("resumed.st")), Read(Path("whole.st")));

  // A second signal ends the job at once (a new run in the same directory starts over).
  interrupted.push_back("--start-over");
  bool twice = false;
  const ProcessResult killed =
      testing::RunProcess(interrupted, 300, [&twice](pid_t pid, const std::string& output) {
        if (!twice && absl::StrContains(output, "step 3/400")) {
          twice = true;
          ::kill(pid, SIGINT);
          ::usleep(1000);
          ::kill(pid, SIGINT);
        }
      });
  EXPECT_EQ(killed.exit_code, 128 + SIGINT) << killed.output;
  EXPECT_TRUE(absl::StrContains(killed.output, "second signal")) << killed.output;
}

}  // namespace
}  // namespace gpipe
