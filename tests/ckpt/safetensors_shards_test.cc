// Sharded exports: save_pretrained's greedy split in tensor order, its file names and index,
// read back whole by HfCheckpoint; one shard stays the plain file.
#include "runtime/ckpt/safetensors_shards.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/ckpt/hf_checkpoint.h"
#include "runtime/core/file_io.h"
#include "tests/support/file_fixtures.h"

namespace gpipe {
namespace {

using ::gpipe::testing::FreshTempDir;

// Five tensors of 4, 2, 3, 9 and 1 values.
std::vector<NamedTensorData> Tensors() {
  std::vector<NamedTensorData> tensors;
  int next = 0;
  for (auto [name, n] : {std::pair{"a", 4}, {"b", 2}, {"c", 3}, {"d", 9}, {"e", 1}}) {
    NamedTensorData t{name, {n}, {}};
    for (int i = 0; i < n; ++i) t.values.push_back(static_cast<float>(next++));
    tensors.push_back(std::move(t));
  }
  return tensors;
}

TEST(SafetensorsShardsTest, SplitsGreedilyInOrderAndReadsBackThroughTheIndex) {
  const std::string dir = FreshTempDir();
  const std::vector<NamedTensorData> tensors = Tensors();
  // 24 bytes a shard in F32: [a b] 24, [c] 12 (+d would pass), [d] 36 alone, [e].
  absl::StatusOr<ShardedExport> plan =
      PlanShards(dir + "/model.safetensors", tensors, SafetensorsDtype::kF32, 24);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->shard_of, (std::vector<int>{0, 0, 1, 2, 3}));
  ASSERT_EQ(plan->shards.size(), 4u);
  EXPECT_EQ(plan->shards[0], dir + "/model-00001-of-00004.safetensors");
  EXPECT_EQ(plan->shards[3], dir + "/model-00004-of-00004.safetensors");
  EXPECT_EQ(plan->index, dir + "/model.safetensors.index.json");
  ASSERT_TRUE(WriteShards(*plan, tensors, {{"format", "pt"}}, SafetensorsDtype::kF32).ok());
  const std::string index = *ReadWholeFile(plan->index);
  EXPECT_NE(index.find("\"total_size\":76"), std::string::npos) << index;
  EXPECT_NE(index.find("\"d\":\"model-00003-of-00004.safetensors\""), std::string::npos) << index;
  absl::StatusOr<HfCheckpoint> back = HfCheckpoint::Open(dir);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->tensors().size(), 5u);
  for (const NamedTensorData& t : tensors) {
    EXPECT_EQ(back->Read(t.name)->values, t.values) << t.name;
  }
  // In BF16 the same limit holds twice the values: [a b c] 18 bytes, [d e] 20.
  plan = PlanShards(dir + "/model.safetensors", tensors, SafetensorsDtype::kBF16, 24);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->shard_of, (std::vector<int>{0, 0, 0, 1, 1}));
}

TEST(SafetensorsShardsTest, OneShardIsThePlainFileAndShardsNeedTheSuffix) {
  const std::vector<NamedTensorData> tensors = Tensors();
  absl::StatusOr<ShardedExport> one =
      PlanShards("/x/out.st", tensors, SafetensorsDtype::kF32, 1000);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->shards, std::vector<std::string>{"/x/out.st"});
  EXPECT_TRUE(one->index.empty());
  EXPECT_TRUE(PlanShards("/x/out.st", tensors, SafetensorsDtype::kF32, 0).ok());
  absl::StatusOr<ShardedExport> split = PlanShards("/x/out.st", tensors, SafetensorsDtype::kF32, 8);
  EXPECT_EQ(split.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(split.status().message().find("must end in .safetensors"), std::string::npos);
}

}  // namespace
}  // namespace gpipe
