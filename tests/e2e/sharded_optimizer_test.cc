// training.shard_optimizer_state (ZeRO stage 1) keeps the core promise: D replicas that
// reduce-scatter their gradients, each update its 1/D of every parameter with 1/D of the
// optimizer state and all-gather the result train the weights one process trains on the whole
// batch. With two replicas every sum is a + b, so the sharded run is bit-identical to the
// unsharded one; with four, MPI's reduce-scatter and all-reduce may add in other orders, and the
// runs agree within rounding. Each case trains under mpirun and compares the exported weights
// (the export checks that every replica holds bit-identical values). Checkpoints store each
// replica's parts and resume sharded or not, under another replica count.
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/core/file_io.h"
#include "tests/e2e/equivalence_harness.h"
#include "tests/support/process_runner.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;
using ::gpipe::testing::ProcessResult;
using ::gpipe::testing::Weights;

constexpr char kShard[] = "training { shard_optimizer_state: true }";
constexpr char kAdam[] = "training { optimizer { adam { lr: 0.01 weight_decay: 0.01 } } }";
constexpr char kTinyLm[] = "tests/e2e/testdata/tiny_lm.pbtxt";
constexpr char kConvnet[] = "tests/e2e/testdata/convnet.pbtxt";
constexpr char kSgd[] = "training { optimizer { sgd { lr: 0.05 momentum: 0.9 } } }";

class ShardedOptimizerTest : public testing::EquivalenceHarness {
 protected:
  void SetUp() override { dir_ = scratch_.path(); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // equivalence.pbtxt (global batch 32) at micro-batches of 8 samples whatever D.
  Weights Run(int stages, int replicas, bool sharded, std::vector<std::string> overrides = {}) {
    overrides.insert(overrides.begin(),
                     absl::StrCat("pipeline { micro_batches: ", 4 / replicas, " }"));
    if (sharded) overrides.push_back(kShard);
    return TrainReplicated(stages, replicas, overrides);
  }

  // gpipe-worker on `stages` x `replicas` ranks of equivalence.pbtxt with `args`.
  ProcessResult Worker(int stages, int replicas, const std::vector<std::string>& args) {
    std::vector<std::string> argv = testing::MpirunPrefix(stages * replicas);
    argv.insert(argv.end(), {testing::BinPath("gpipe-worker"), "--plan",
                             testing::SourcePath(testing::kEquivalencePlan), "--override",
                             absl::StrCat("pipeline { stages: ", stages, " data_parallel: ",
                                          replicas, " micro_batches: ", 4 / replicas, " }")});
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunProcess(argv, 180);
  }
  std::string Checkpoint() const {
    return absl::StrCat("checkpoint { dir: \"", Path("ckpt"), "\" every_steps: 2 }");
  }
  static Weights Read(const std::string& path) { return ReadWeights(path); }
  // The integer list `key` of the last training record of a metrics file.
  static std::vector<int64_t> LastList(const std::string& path, const std::string& key) {
    std::ifstream in(path);
    std::string last;
    for (std::string line; std::getline(in, line);) {
      if (!absl::StrContains(line, "\"eval\"") && absl::StrContains(line, key)) last = line;
    }
    std::smatch match;
    const std::regex list("\"" + key + "\":\\[([0-9,]*)\\]");
    std::vector<int64_t> out;
    if (!std::regex_search(last, match, list)) return out;
    for (absl::string_view v : absl::StrSplit(match[1].str(), ',', absl::SkipEmpty())) {
      int64_t n = 0;
      EXPECT_TRUE(absl::SimpleAtoi(v, &n)) << v;
      out.push_back(n);
    }
    return out;
  }

  const testing::ScratchDir scratch_;
  std::string dir_;
};

TEST_F(ShardedOptimizerTest, ShardedUpdateEqualsOneProcessAndTheUnshardedOne) {
  for (const std::string& optimizer : {std::string(), std::string(kAdam)}) {
    SCOPED_TRACE(optimizer.empty() ? "sgd with momentum" : "adam");
    std::vector<std::string> common;
    if (!optimizer.empty()) common.push_back(optimizer);
    const Weights single = Run(1, 1, false, common);
    const Weights two_by_two = Run(2, 2, false, common);
    const Weights sharded_two_by_two = Run(2, 2, true, common);
    const Weights sharded_one_by_four = Run(1, 4, true, common);
    const Weights one_by_four = Run(1, 4, false, common);
    ExpectBitIdentical(sharded_two_by_two, two_by_two);
    ExpectClose(sharded_two_by_two, single, 1e-6);
    ExpectClose(sharded_one_by_four, single, 1e-6);
    ExpectClose(sharded_one_by_four, one_by_four, 1e-6);
    std::cout << "1 x 4 sharded against unsharded: max relative difference "
              << MaxRelativeDifference(sharded_one_by_four, one_by_four) << "\n";
    // Guards the comparisons against runs that never update anything.
    EXPECT_TRUE(Differs(sharded_two_by_two, Run(2, 2, true, {"training { steps: 1 }"})));
  }
}

TEST_F(ShardedOptimizerTest, EveryScheduleWithTwoReplicasOfTwoStages) {
  const Weights single = Run(1, 1, false);
  for (const char* schedule :
       {"schedule: GPIPE", "schedule: ONE_F_ONE_B", "schedule: INTERLEAVED_1F1B virtual_stages: 2",
        "schedule: ZERO_BUBBLE_H1", "schedule: ZERO_BUBBLE_H2 remat: ALWAYS",
        "schedule: ZERO_BUBBLE_V", "schedule: DUALPIPE_V remat: EXCEPT_LAST"}) {
    SCOPED_TRACE(schedule);
    const std::string pipeline = absl::StrCat("pipeline { ", schedule, " }");
    const Weights sharded = Run(2, 2, true, {pipeline});
    ExpectBitIdentical(sharded, Run(2, 2, false, {pipeline}));
    ExpectClose(sharded, single, 1e-6);
  }
}

TEST_F(ShardedOptimizerTest, TiesClippingAndBatchNormKeepTheirMeaning) {
  // Tied embeddings across stages: each replica sums its part of both copies.
  const Weights tied =
      TrainReplicated(2, 2, {kSgd, "pipeline { micro_batches: 2 }", kShard}, kTinyLm);
  ExpectBitIdentical(tied, TrainReplicated(2, 2, {kSgd, "pipeline { micro_batches: 2 }"}, kTinyLm));
  ASSERT_TRUE(tied.contains("embed.weight") && tied.contains("head.weight"));
  EXPECT_EQ(tied.at("embed.weight").values, tied.at("head.weight").values);
  // Clipping: the replicas report the squares of their parts; the norm adds them in another
  // order than one replica's whole sums, so the update agrees within rounding.
  const std::string clip = "training { clip_grad_norm: 0.05 }";
  ExpectClose(Run(2, 2, true, {clip}), Run(1, 1, false, {clip}), 1e-6);
  ExpectClose(Run(2, 2, true, {clip}), Run(2, 2, false, {clip}), 1e-6);
  // Batch norm's running statistics are still averaged whole over the replicas.
  const std::string pipeline = "pipeline { micro_batches: 2 schedule: ONE_F_ONE_B }";
  ExpectBitIdentical(TrainReplicated(2, 2, {kSgd, pipeline, kShard}, kConvnet),
                     TrainReplicated(2, 2, {kSgd, pipeline}, kConvnet));
}

TEST_F(ShardedOptimizerTest, OptimizerStateBytesPerRankDropToAboutOneOverD) {
  ASSERT_EQ(Worker(1, 1, {"--metrics-out", Path("d1.jsonl")}).exit_code, 0);
  const std::vector<int64_t> whole = LastList(Path("d1.jsonl"), "peak_optimizer_state_bytes");
  ASSERT_EQ(whole.size(), 1u);
  // SGD with momentum: one f32 per parameter element (1725 of them).
  EXPECT_EQ(whole[0], 1725 * 4);
  for (int replicas : {2, 4}) {
    SCOPED_TRACE(absl::StrCat(replicas, " replicas"));
    const std::string metrics = Path(absl::StrCat("d", replicas, ".jsonl"));
    const ProcessResult run = Worker(
        1, replicas,
        {"--override", kShard, "--override", "runtime { log_every: 1 }", "--metrics-out", metrics});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const std::vector<int64_t> parts = LastList(metrics, "peak_optimizer_state_bytes");
    ASSERT_EQ(parts.size(), static_cast<size_t>(replicas));
    int64_t sum = 0;
    for (int64_t bytes : parts) {
      sum += bytes;
      // 1/D of each of the model's 9 tensors, the last replica also their remainders.
      EXPECT_LE(bytes, whole[0] / replicas + 9 * replicas * 4);
      EXPECT_GE(bytes, whole[0] / replicas - 9 * replicas * 4);
    }
    EXPECT_EQ(sum, whole[0]);
    // The progress line names the collectives.
    EXPECT_TRUE(absl::StrContains(run.output, "replicas, reduce-scatter ")) << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, ", all-gather ")) << run.output;
  }
}

TEST_F(ShardedOptimizerTest, CheckpointsResumeShardedOrNotUnderOtherReplicaCounts) {
  for (const std::string& optimizer : {std::string(), std::string(kAdam)}) {
    SCOPED_TRACE(optimizer.empty() ? "sgd with momentum" : "adam");
    fs::remove_all(Path("ckpt"));
    std::vector<std::string> common = {"--override", "training { steps: 4 }"};
    if (!optimizer.empty()) common.insert(common.end(), {"--override", optimizer});
    const auto with = [&](std::vector<std::string> args) {
      args.insert(args.begin(), common.begin(), common.end());
      return args;
    };
    const ProcessResult whole =
        Worker(2, 2, with({"--override", kShard, "--export", Path("whole.st")}));
    ASSERT_EQ(whole.exit_code, 0) << whole.output;
    // Two steps sharded over two replicas, checkpointed: replica 1 writes its parts too.
    const ProcessResult first = Worker(2, 2,
                                       with({"--override", kShard, "--override", Checkpoint(),
                                             "--override", "training { steps: 2 }"}));
    ASSERT_EQ(first.exit_code, 0) << first.output;
    const std::string saved = Path("ckpt/step-000000002");
    EXPECT_TRUE(fs::exists(saved + "/stage-001-of-002-replica-001.safetensors"));
    const std::string manifest = *ReadWholeFile(saved + "/manifest.pbtxt");
    EXPECT_TRUE(absl::StrContains(manifest, "element_begin")) << manifest;
    // The same sharding continues bit for bit.
    ProcessResult rest =
        Worker(2, 2, with({"--override", kShard, "--resume", saved, "--export", Path("same.st")}));
    ASSERT_EQ(rest.exit_code, 0) << rest.output;
    ExpectBitIdentical(Read(Path("same.st")), Read(Path("whole.st")));
    // Unsharded on one process, and sharded over four replicas of one stage.
    rest = Worker(1, 1, with({"--resume", saved, "--export", Path("single.st")}));
    ASSERT_EQ(rest.exit_code, 0) << rest.output;
    ExpectClose(Read(Path("single.st")), Read(Path("whole.st")), 1e-6);
    rest =
        Worker(1, 4, with({"--override", kShard, "--resume", saved, "--export", Path("four.st")}));
    ASSERT_EQ(rest.exit_code, 0) << rest.output;
    ExpectClose(Read(Path("four.st")), Read(Path("whole.st")), 1e-6);
    // And the other way: an unsharded checkpoint resumes sharded.
    fs::remove_all(Path("ckpt"));
    ASSERT_EQ(
        Worker(2, 1, with({"--override", Checkpoint(), "--override", "training { steps: 2 }"}))
            .exit_code,
        0);
    rest = Worker(
        1, 2, with({"--override", kShard, "--resume", saved, "--export", Path("from_whole.st")}));
    ASSERT_EQ(rest.exit_code, 0) << rest.output;
    ExpectClose(Read(Path("from_whole.st")), Read(Path("whole.st")), 1e-6);
  }
}

TEST_F(ShardedOptimizerTest, ShardingWithoutReplicasIsAPlanError) {
  const ProcessResult run = Worker(2, 1, {"--override", kShard});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(run.output, "training.shard_optimizer_state")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "data_parallel >= 2")) << run.output;
}

}  // namespace
}  // namespace gpipe
