// Checkpoint files: names and `latest`, --resume resolution, manifest parsing and its consistency
// checks, shards read back by name with their size and CRC-32 checked, and the commit order that
// keeps `latest` naming a complete checkpoint (pruning included).
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/ckpt/checkpoint_layout.h"
#include "runtime/ckpt/checkpoint_manifest.h"
#include "runtime/ckpt/checkpoint_reader.h"
#include "runtime/ckpt/checkpoint_writer.h"
#include "runtime/core/file_io.h"
#include "tests/ckpt/checkpoint_fixture.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;

using ::gpipe::testing::Contains;
using ::gpipe::testing::FreshTempDir;
using ::gpipe::testing::WriteText;
using ::gpipe::testing::WriteTwoStageCheckpoint;

TEST(CheckpointLayoutTest, NamesSortAndParseBack) {
  EXPECT_EQ(CheckpointStepName(120), "step-000000120");
  EXPECT_EQ(CheckpointShardName(3, 4), "stage-003-of-004.safetensors");
  const std::string dir = FreshTempDir();
  fs::create_directories(dir + "/step-000000010");
  fs::create_directories(dir + "/step-000000002");
  fs::create_directories(dir + "/step-x");  // not a checkpoint: ignored
  WriteText(dir + "/step-000000002/manifest.pbtxt", "");
  const std::vector<CheckpointEntry> entries = ListCheckpoints(dir);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].step, 2);
  EXPECT_TRUE(entries[0].complete);
  EXPECT_EQ(entries[1].step, 10);
  EXPECT_FALSE(entries[1].complete);
}

TEST(CheckpointLayoutTest, ResumeResolvesLatestDirectoriesAndSaysWhatIsMissing) {
  const std::string dir = FreshTempDir();
  WriteTwoStageCheckpoint(dir, 4);
  const std::string step4 = (fs::path(dir) / "step-000000004").string();
  EXPECT_EQ(*ResolveCheckpoint("latest", dir), step4);
  EXPECT_EQ(*ResolveCheckpoint(dir, ""), step4);
  EXPECT_EQ(*ResolveCheckpoint(step4, ""), step4);

  absl::Status status = ResolveCheckpoint("latest", "").status();
  EXPECT_TRUE(Contains(status, "the plan has no checkpoint.dir")) << status;
  status = ResolveCheckpoint(dir + "/nope", "").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(status, "no such directory")) << status;
  const std::string empty = dir + "/empty";
  fs::create_directories(empty);
  status = ResolveCheckpoint(empty, "").status();
  EXPECT_TRUE(Contains(status, "not a checkpoint")) << status;
  status = ResolveCheckpoint("latest", empty).status();
  EXPECT_TRUE(Contains(status, "holds no complete checkpoint")) << status;

  for (const std::string& garbage : {std::string("../../etc\n"), std::string("step-12x"),
                                     std::string(300, 'x'), std::string("\xff\xfe")}) {
    WriteText(dir + "/latest", garbage);
    status = ResolveCheckpoint("latest", dir).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  }
}

TEST(CheckpointManifestTest, ParseErrorsCarryFileLineAndColumn) {
  absl::Status status =
      ParseCheckpointManifest("format_version: 1\nstep: 3\nbogus_field: 2\n", "m.pbtxt").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(status, "m.pbtxt:3:12: ")) << status;
  EXPECT_TRUE(Contains(status, "no field named \"bogus_field\"")) << status;
  status = ParseCheckpointManifest("step: \"three\"", "m.pbtxt").status();
  EXPECT_TRUE(Contains(status, "m.pbtxt:1:")) << status;
}

TEST(CheckpointManifestTest, InconsistentManifestsAreRefusedNamingTheEntry) {
  const auto check = [](const std::string& text, const std::string& expected) {
    const absl::Status status = ParseCheckpointManifest(text, "m").status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << text;
    EXPECT_TRUE(Contains(status, expected)) << status;
  };
  check("format_version: 2", "format_version is 2");
  check("format_version: 1 step: 2 applied_steps: 3", "inconsistent counts");
  check("format_version: 1 shards { file: \"../x.safetensors\" }", "not a .safetensors file name");
  check("format_version: 1 shards { file: \"a.safetensors\" } shards { file: \"a.safetensors\" }",
        "listed twice");
  check("format_version: 1 tensors { name: \"w\" kind: PARAMETER shard: 0 }", "is not one of");
  check("format_version: 1 shards { file: \"a.safetensors\" } tensors { name: \"w\" shard: 0 }",
        "no kind");
  check(
      "format_version: 1 shards { file: \"a.safetensors\" } "
      "tensors { name: \"w\" kind: PARAMETER shard: 0 shape: 4611686018427387904 shape: 4 }",
      "too large");
}

TEST(CheckpointReaderTest, ReadsTensorsByNameFromWhicheverShard) {
  const std::string dir = FreshTempDir();
  const pb::CheckpointManifest manifest = WriteTwoStageCheckpoint(dir, 3);
  const std::string checkpoint = dir + "/step-000000003";
  const std::vector<std::string> names = {"b", "a:exp_avg", "a"};
  absl::StatusOr<std::vector<NamedTensorData>> read =
      ReadCheckpointTensors(checkpoint, manifest, names);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 3u);
  EXPECT_EQ((*read)[0].name, "b");
  EXPECT_EQ((*read)[0].values, std::vector<float>({3.0f}));
  EXPECT_EQ((*read)[1].values, std::vector<float>({0.5f, 0.25f}));
  EXPECT_EQ((*read)[2].values, std::vector<float>({1.0f, 2.0f}));
  // The manifest on disk is the one committed.
  absl::StatusOr<pb::CheckpointManifest> on_disk = ReadCheckpointManifest(checkpoint);
  ASSERT_TRUE(on_disk.ok()) << on_disk.status();
  EXPECT_EQ(on_disk->SerializeAsString(), manifest.SerializeAsString());

  const std::vector<std::string> unknown = {"c"};
  const absl::Status missing = ReadCheckpointTensors(checkpoint, manifest, unknown).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(missing, "has no tensor 'c'")) << missing;
}

TEST(CheckpointReaderTest, MissingTruncatedCorruptAndInconsistentShardsNameTheFile) {
  const std::string dir = FreshTempDir();
  pb::CheckpointManifest manifest = WriteTwoStageCheckpoint(dir, 1);
  const std::string checkpoint = dir + "/step-000000001";
  const std::string shard = checkpoint + "/stage-001-of-002.safetensors";
  const std::vector<std::string> b = {"b"};
  const std::string original = *ReadWholeFile(shard);

  const auto expect_loss = [&](const std::string& expected) {
    const absl::Status status = ReadCheckpointTensors(checkpoint, manifest, b).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_TRUE(Contains(status, shard)) << status;
    EXPECT_TRUE(Contains(status, expected)) << status;
  };
  WriteText(shard, original.substr(0, original.size() - 3));
  expect_loss("(truncated)");
  std::string flipped = original;
  flipped[flipped.size() - 1] ^= 0x40;
  WriteText(shard, flipped);
  expect_loss("is corrupt: CRC-32");
  fs::remove(shard);
  expect_loss("is missing or unreadable");
  fs::create_directory(shard);
  expect_loss("not a regular file");
  fs::remove(shard);
  WriteText(shard, original);
  // The manifest places "b" with another shape than the shard holds.
  manifest.mutable_tensors(2)->set_shape(1, 7);
  expect_loss("has shape [1, 1], the manifest says [1, 7]");
  // A stage-0 tensor claimed by shard 1.
  manifest = *ReadCheckpointManifest(checkpoint);
  manifest.mutable_tensors(0)->set_shard(1);
  const std::vector<std::string> a = {"a"};
  const absl::Status status = ReadCheckpointTensors(checkpoint, manifest, a).status();
  EXPECT_TRUE(Contains(status, "lacks tensor 'a'")) << status;
}

TEST(CheckpointWriterTest, CommitPointsLatestAndKeepsTheNewest) {
  const std::string dir = FreshTempDir();
  for (int64_t step : {2, 4, 6, 8}) WriteTwoStageCheckpoint(dir, step, /*keep_last=*/2);
  std::vector<int64_t> steps;
  for (const CheckpointEntry& e : ListCheckpoints(dir)) steps.push_back(e.step);
  EXPECT_EQ(steps, std::vector<int64_t>({6, 8}));
  EXPECT_EQ(*ReadLatestCheckpoint(dir), dir + "/step-000000008");

  // Incomplete checkpoints left by a crash (shards, no manifest) go with the next commit, a
  // newer one too: the directory's lock makes the committing job its only writer, and it
  // writes one checkpoint at a time (checkpoint_retention.h).
  fs::create_directories(dir + "/step-000000009");
  WriteText(dir + "/step-000000009/stage-000-of-002.safetensors", "partial");
  fs::create_directories(dir + "/step-000000007");
  WriteTwoStageCheckpoint(dir, 8, 2);
  EXPECT_FALSE(fs::exists(dir + "/step-000000007"));
  EXPECT_FALSE(fs::exists(dir + "/step-000000009"));
}

TEST(CheckpointWriterTest, RewritingTheLatestStepMovesLatestBackFirst) {
  const std::string dir = FreshTempDir();
  WriteTwoStageCheckpoint(dir, 2);
  WriteTwoStageCheckpoint(dir, 4);
  // A run resumed from step 2 reaches step 4 again: while step 4 is rewritten, latest names 2.
  ASSERT_TRUE(PrepareCheckpoint(dir, 4).ok());
  EXPECT_EQ(*ReadLatestCheckpoint(dir), dir + "/step-000000002");
  EXPECT_TRUE(fs::is_empty(dir + "/step-000000004"));
  // With nothing older, latest is removed rather than left naming an empty directory.
  const std::string other = FreshTempDir() + "/other";
  WriteTwoStageCheckpoint(other, 4);
  ASSERT_TRUE(PrepareCheckpoint(other, 4).ok());
  EXPECT_FALSE(fs::exists(other + "/latest"));
}

TEST(CheckpointWriterTest, PrepareRefusesAFileWhereTheDirectoryGoes) {
  const std::string dir = FreshTempDir() + "/file";
  WriteText(dir, "x");
  const absl::Status status = PrepareCheckpoint(dir, 1).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(status, dir)) << status;
}

}  // namespace
}  // namespace gpipe
