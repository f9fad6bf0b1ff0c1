// The embedding API (include/gpipe/) under mpirun with 4 ranks: two runtimes on split
// communicators training side by side, each bit-identical to one process training alone; steps
// in portions with callbacks, evaluation, a checkpoint and a resumed runtime bit-identical to an
// uninterrupted one; a stop asked by a callback; plans the program cannot run refused on every
// rank with the communicator still usable. The custom layer and data source are the embedding
// example's (examples/embed).
#include <mpi.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "examples/embed/cluster_source.h"
#include "examples/embed/scaled_tanh.h"
#include "gmock/gmock.h"
#include "gpipe/gpipe.h"
#include "gtest/gtest.h"
#include "runtime/ckpt/safetensors.h"

namespace gpipe {
namespace {

using ::testing::HasSubstr;

// clang-format off
constexpr char kPlan[] = R"pb(
  name: "api-test"
  model {
    input { shape: [8] }
    layers { name: "fc1" linear { out_features: 16 } }
    layers { name: "act1" custom { type: "scaled_tanh" numbers { key: "scale" value: 1.5 } } }
    layers { name: "fc2" linear { out_features: 16 } }
    layers { name: "act2" custom { type: "scaled_tanh" } }
    layers { name: "head" linear { out_features: 3 } }
    loss { softmax_cross_entropy {} }
  }
  pipeline { stages: 2 micro_batches: 4 schedule: GPIPE }
  training {
    global_batch: 32
    steps: 8
    seed: 5
    optimizer { sgd { lr: 0.05 momentum: 0.9 } }
  }
  data {
    custom { name: "clusters" eval_split: true numbers { key: "samples" value: 512 } }
    shuffle: true
  }
  runtime { device: CPU log_every: 0 timeouts { wait_seconds: 60 } }
)pb";
// clang-format on

Extensions ExampleExtensions() {
  Extensions extensions;
  EXPECT_TRUE(
      extensions.AddLayer({.type = "scaled_tanh", .cpu = gpipe_example::ScaledTanh::Create}).ok());
  EXPECT_TRUE(extensions.AddDataSource("clusters", gpipe_example::ClusterSource::Open).ok());
  return extensions;
}

int RankOf(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  return rank;
}

// A directory every rank of the world shares (made by rank 0).
std::string SharedTempDir() {
  char path[256] = {};
  if (RankOf(MPI_COMM_WORLD) == 0) {
    std::string pattern = (std::filesystem::temp_directory_path() / "gpipe-api-XXXXXX").string();
    std::strncpy(path, pattern.c_str(), sizeof(path) - 1);
    if (mkdtemp(path) == nullptr) path[0] = '\0';
  }
  MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

// The first bitwise difference between two exports, or "" when they are identical.
std::string Difference(const std::string& a, const std::string& b) {
  auto first = ReadSafetensors(a);
  auto second = ReadSafetensors(b);
  if (!first.ok() || !second.ok()) return "unreadable export";
  if (first->size() != second->size()) return "different tensor counts";
  int compared = 0;
  for (const NamedTensorData& t : *first) {
    const NamedTensorData* match = nullptr;
    for (const NamedTensorData& u : *second) {
      if (u.name == t.name) match = &u;
    }
    if (match == nullptr) return absl::StrCat(t.name, " is missing");
    if (match->shape != t.shape ||
        std::memcmp(match->values.data(), t.values.data(), t.values.size() * sizeof(float)) != 0) {
      return absl::StrCat(t.name, " differs");
    }
    ++compared;
  }
  return compared > 0 ? "" : "no tensors";
}

// Trains `plan` on `comm` to the end and exports it to `path`; the step losses on rank 0.
std::vector<double> TrainAndExport(MPI_Comm comm, const PlanSource& plan, const std::string& path,
                                   RuntimeOptions options = {}) {
  auto runtime = Runtime::Create(comm, plan, ExampleExtensions(), std::move(options));
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  if (!runtime.ok()) return {};
  auto trained = (*runtime)->Train();
  EXPECT_TRUE(trained.ok()) << trained.status();
  EXPECT_TRUE(trained.ok() && trained->finished);
  EXPECT_TRUE((*runtime)->Export(path).ok());
  EXPECT_TRUE((*runtime)->Finish().ok());
  std::vector<double> losses;
  for (const StepMetrics& m : (*runtime)->history()) losses.push_back(m.loss);
  return losses;
}

class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(RankOf(MPI_COMM_WORLD) >= 0, true);
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ASSERT_EQ(size, 4) << "run under mpirun -np 4";
    dir_ = SharedTempDir();
    ASSERT_FALSE(dir_.empty());
    // Two halves of the world: ranks {0, 1} and {2, 3}.
    half_index_ = RankOf(MPI_COMM_WORLD) / 2;
    MPI_Comm_split(MPI_COMM_WORLD, half_index_, RankOf(MPI_COMM_WORLD), &half_);
  }
  void TearDown() override {
    MPI_Comm_free(&half_);
    MPI_Barrier(MPI_COMM_WORLD);
    if (RankOf(MPI_COMM_WORLD) == 0) std::filesystem::remove_all(dir_);
  }
  std::string Path(const std::string& name) const {
    return absl::StrCat(dir_, "/", name, "-", half_index_);
  }

  std::string dir_;
  int half_index_ = 0;
  MPI_Comm half_ = MPI_COMM_NULL;
};

TEST_F(RuntimeTest, TwoRuntimesOnSplitCommunicatorsEachMatchOneProcess) {
  // Each half trains its own model (another seed), at the same time.
  PlanSource plan = PlanSource::Text(kPlan, "api-test.pbtxt");
  plan.Override(absl::StrCat("training { seed: ", 11 + half_index_, " }"));
  const std::vector<double> pipelined = TrainAndExport(half_, plan, Path("pipelined"));
  // Each half's first rank trains the same model on one process (one stage).
  if (RankOf(half_) == 0) {
    PlanSource alone = plan;
    alone.Override("pipeline { stages: 1 }");
    const std::vector<double> single = TrainAndExport(MPI_COMM_SELF, alone, Path("single"));
    EXPECT_EQ(pipelined.size(), 8u);
    EXPECT_EQ(pipelined, single) << "step losses differ";
    EXPECT_EQ(Difference(Path("pipelined"), Path("single")), "");
  }
  // The halves trained different models (both exports are complete after the barrier): the
  // first tensor already differs, not merely a missing file.
  MPI_Barrier(MPI_COMM_WORLD);
  if (RankOf(MPI_COMM_WORLD) == 0) {
    EXPECT_THAT(Difference(absl::StrCat(dir_, "/pipelined-0"), absl::StrCat(dir_, "/pipelined-1")),
                HasSubstr(" differs"));
  }
}

TEST_F(RuntimeTest, StepsInPortionsCheckpointAndResumeMatchAnUninterruptedRun) {
  PlanSource plan = PlanSource::Text(kPlan, "api-test.pbtxt");
  plan.Override("training { eval_every: 4 }");
  PlanSource checkpointed = plan;
  checkpointed.Override(absl::StrCat("checkpoint { dir: \"", Path("ckpt"), "\" }"));
  {
    auto runtime = Runtime::Create(half_, checkpointed, ExampleExtensions());
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    Runtime& job = **runtime;
    int evaluations = 0;
    std::vector<CheckpointInfo> checkpoints;
    Callbacks callbacks{
        .on_evaluation =
            [&](const EvalMetrics& m) {
              ++evaluations;
              EXPECT_GT(m.samples, 0);
              EXPECT_EQ(m.after_step, 4);
            },
        .on_checkpoint = [&](const CheckpointInfo& c) { checkpoints.push_back(c); }};
    auto first = job.RunSteps(3, callbacks);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->steps_done, 3);
    EXPECT_FALSE(first->finished);
    auto second = job.RunSteps(2, callbacks);
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ(second->steps_done, 5);
    ASSERT_TRUE(job.SaveCheckpoint(callbacks).ok());
    auto eval = job.Evaluate();
    ASSERT_TRUE(eval.ok()) << eval.status();
    EXPECT_EQ(eval->has_value(), job.rank() == 0);
    if (job.rank() == 0) {
      EXPECT_EQ(evaluations, 1);  // at step 4, from eval_every
      ASSERT_EQ(checkpoints.size(), 1u);
      EXPECT_EQ(checkpoints[0].step, 5);
      EXPECT_TRUE(std::filesystem::exists(checkpoints[0].directory + "/manifest.pbtxt"))
          << checkpoints[0].directory;
      EXPECT_EQ(job.history().size(), 5u);
      EXPECT_EQ((*eval)->after_step, 5);
    } else {
      EXPECT_TRUE(job.history().empty());
    }
    EXPECT_TRUE(job.Finish().ok());
    EXPECT_EQ(job.RunSteps(1).status().code(), absl::StatusCode::kFailedPrecondition);
  }
  RuntimeOptions resume;
  resume.resume = "latest";
  TrainAndExport(half_, checkpointed, Path("resumed"), resume);
  TrainAndExport(half_, plan, Path("uninterrupted"));
  if (RankOf(half_) == 0) {
    EXPECT_EQ(Difference(Path("resumed"), Path("uninterrupted")), "");
  }
}

TEST_F(RuntimeTest, ACallbackStopsTrainingOnEveryRank) {
  auto runtime = Runtime::Create(half_, PlanSource::Text(kPlan), ExampleExtensions());
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  auto trained = (*runtime)->Train({.on_step = [](const StepMetrics& m) {
    return m.step == 2 ? StepAction::kStop : StepAction::kContinue;
  }});
  ASSERT_TRUE(trained.ok()) << trained.status();
  EXPECT_TRUE(trained->stopped);
  EXPECT_FALSE(trained->finished);
  EXPECT_EQ(trained->steps_done, 3);
  EXPECT_EQ((*runtime)->steps_done(), 3);
}

TEST_F(RuntimeTest, PlansTheProgramCannotRunAreRefusedEverywhere) {
  const auto refused = [&](const PlanSource& plan, const std::string& expected) {
    auto runtime = Runtime::Create(half_, plan, ExampleExtensions());
    ASSERT_FALSE(runtime.ok()) << expected;
    EXPECT_EQ(runtime.status().code(), absl::StatusCode::kInvalidArgument) << runtime.status();
    EXPECT_THAT(runtime.status().message(), HasSubstr(expected));
  };
  std::string unknown_type = kPlan;
  const std::string act2 = "custom { type: \"scaled_tanh\" } }";
  unknown_type.replace(unknown_type.find(act2), act2.size(), "custom { type: \"nope\" } }");
  refused(PlanSource::Text(unknown_type, "bad.pbtxt"),
          "bad.pbtxt:8:5: model.layers[3]: layer 'act2' (custom, input [16]): custom layer type "
          "'nope' is not registered by this program (it registers scaled_tanh)");
  refused(PlanSource::Text(kPlan, "bad.pbtxt").Override("data { custom { name: \"elsewhere\" } }"),
          "--override[1]:1:17: data.custom.name 'elsewhere' is not a data source of this program "
          "(it registers clusters)");
  refused(PlanSource::Text(kPlan).Override("runtime { device: CUDA }"),
          "has kernels for CPU but not for runtime.device CUDA");
  refused(PlanSource::Text(kPlan).Override(
              "data { custom { eval_split: false } } training { eval_every: 2 }"),
          "data.custom.eval_split");
  // The communicator is still usable.
  auto runtime = Runtime::Create(half_, PlanSource::Text(kPlan), ExampleExtensions());
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  auto trained = (*runtime)->RunSteps(1);
  ASSERT_TRUE(trained.ok()) << trained.status();
  EXPECT_EQ(trained->steps_done, 1);
}

}  // namespace
}  // namespace gpipe
