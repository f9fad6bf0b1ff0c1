// --init-from against the plan: a tied head may be absent (save_pretrained writes it once),
// nothing in the file is ignored, shapes must match, and every untied parameter must be there.
#include "runtime/coord/init_from.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/estimate/resolve_plan.h"
#include "tests/support/file_fixtures.h"

namespace gpipe {
namespace {

using ::gpipe::testing::FreshTempDir;
using ::testing::HasSubstr;

// A tiny tied language model: embed.weight [256, 4] and head.weight [256, 4] are one parameter.
AnalyzedPlan TiedModel(const std::string& dir) {
  ::gpipe::testing::WriteFile(dir + "/corpus.txt", std::string(64, 'a'));
  const std::string text = R"(
    model {
      input { shape: [8] type: INT64 }
      layers { name: "embed" embedding { num_embeddings: 256 embedding_dim: 4 } }
      layers { name: "norm" layer_norm {} }
      layers { name: "head" linear { out_features: 256 bias: false } }
      loss { softmax_cross_entropy {} }
      ties { parameters: ["embed.weight", "head.weight"] }
    }
    pipeline { stages: 1 micro_batches: 1 }
    training { global_batch: 2 steps: 1 optimizer { sgd { lr: 0.1 } } }
    data { text { paths: "corpus.txt" } })";
  absl::StatusOr<ResolvedPlan> resolved =
      ResolvePlan(PlanText{.text = text, .name = "tied.pbtxt", .directory = dir}, {},
                  LayerRegistry::WithBuiltins());
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return resolved.ok() ? resolved->analyzed : AnalyzedPlan{};
}

std::vector<float> Counting(int n) {
  std::vector<float> values(n);
  for (int i = 0; i < n; ++i) values[i] = static_cast<float>(i) * 0.5f;
  return values;
}

absl::StatusOr<HfCheckpoint> Checkpoint(const std::string& path,
                                        const std::vector<NamedTensorData>& tensors) {
  const absl::StatusOr<WrittenFile> written = WriteSafetensors(path, tensors, {{"format", "pt"}});
  if (!written.ok()) return written.status();
  return HfCheckpoint::Open(path);
}

TEST(InitFromTest, ATiedParameterMayBePresentOnceAndEveryStageGetsItsOwnName) {
  const std::string dir = FreshTempDir();
  const AnalyzedPlan plan = TiedModel(dir);
  absl::StatusOr<HfCheckpoint> file =
      Checkpoint(dir + "/model.safetensors", {{"embed.weight", {256, 4}, Counting(1024)},
                                              {"norm.weight", {4}, {1, 1, 1, 1}},
                                              {"norm.bias", {4}, {0, 0, 0, 0}}});
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(CheckInitFrom(*file, plan).ok()) << CheckInitFrom(*file, plan);
  pb::TieGroup tie;
  tie.add_parameters("embed.weight");
  tie.add_parameters("head.weight");
  absl::StatusOr<std::vector<NamedTensorData>> head =
      ReadInitialTensors(*file, {"head.weight", "norm.bias"}, {tie});
  ASSERT_TRUE(head.ok()) << head.status();
  ASSERT_EQ(head->size(), 2u);
  EXPECT_EQ((*head)[0].name, "head.weight");
  EXPECT_EQ((*head)[0].shape, (std::vector<int64_t>{256, 4}));
  EXPECT_EQ((*head)[0].values, Counting(1024));
  EXPECT_EQ((*head)[1].name, "norm.bias");
  // Without the tie the head is missing.
  EXPECT_EQ(ReadInitialTensors(*file, {"head.weight"}, {}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(InitFromTest, NothingIsIgnoredAndShapesMustMatch) {
  const std::string dir = FreshTempDir();
  const AnalyzedPlan plan = TiedModel(dir);
  const std::string path = dir + "/model.safetensors";
  absl::StatusOr<HfCheckpoint> extra =
      Checkpoint(path, {{"embed.weight", {256, 4}, Counting(1024)},
                        {"norm.weight", {4}, {1, 1, 1, 1}},
                        {"norm.bias", {4}, {0, 0, 0, 0}},
                        {"model.rotary_emb.inv_freq", {2}, {1, 0.5f}}});
  ASSERT_TRUE(extra.ok());
  absl::Status status = CheckInitFrom(*extra, plan);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("--init-from " + path + ": tensor \"model.rotary_emb.inv_freq\" (in " +
                        path + ") is not a parameter or buffer of the plan"));

  absl::StatusOr<HfCheckpoint> shape = Checkpoint(path, {{"embed.weight", {4, 256}, Counting(1024)},
                                                         {"norm.weight", {4}, {1, 1, 1, 1}},
                                                         {"norm.bias", {4}, {0, 0, 0, 0}}});
  ASSERT_TRUE(shape.ok());
  status = CheckInitFrom(*shape, plan);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("tensor \"embed.weight\" (in " + path +
                                          ") has shape [4, 256] but the plan's parameter is "
                                          "[256, 4]"));

  absl::StatusOr<HfCheckpoint> missing = Checkpoint(
      path, {{"head.weight", {256, 4}, Counting(1024)}, {"norm.weight", {4}, {1, 1, 1, 1}}});
  ASSERT_TRUE(missing.ok());
  status = CheckInitFrom(*missing, plan);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(),
              HasSubstr("the plan's parameter \"norm.bias\" is not in the checkpoint"));
}

}  // namespace
}  // namespace gpipe
