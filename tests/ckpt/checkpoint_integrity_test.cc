// What a checkpoint directory must look like to be trusted: the manifest's own checksum and its
// step against the directory's name, a tensor saved in parts (a sharded optimizer state) covered
// exactly once and read back whole, an empty manifest named as such, `latest` a regular file,
// and symlink loops reported as loops wherever a path is examined.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
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

constexpr char kLoop[] = "too many levels of symbolic links (a symlink loop)";

TEST(ManifestChecksumTest, AWrittenManifestCarriesItAndAnEditIsRefused) {
  const std::string dir = FreshTempDir();
  WriteTwoStageCheckpoint(dir, 3);
  const std::string checkpoint = dir + "/step-000000003";
  const std::string path = checkpoint + "/manifest.pbtxt";
  const std::string text = *ReadWholeFile(path);
  ASSERT_NE(text.find("\nmanifest_crc32: "), std::string::npos) << text;
  // Read back, the checksum is verified and cleared.
  absl::StatusOr<pb::CheckpointManifest> read = ReadCheckpointManifest(checkpoint);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_FALSE(read->has_manifest_crc32());

  // Reformatting (comments, spacing) is not an edit; a changed value is.
  WriteText(path, absl::StrReplaceAll(text, {{"\n", "\n\n"}, {"# gpipe", "# edited: gpipe"}}));
  EXPECT_TRUE(ReadCheckpointManifest(checkpoint).ok());
  WriteText(path, absl::StrReplaceAll(text, {{"applied_steps: 3", "applied_steps: 2"}}));
  const absl::Status edited = ReadCheckpointManifest(checkpoint).status();
  EXPECT_EQ(edited.code(), absl::StatusCode::kDataLoss) << edited;
  EXPECT_TRUE(Contains(edited, path + ": the manifest's checksum does not match its text (was it "
                                      "edited by hand?)"))
      << edited;
}

TEST(ManifestChecksumTest, AManifestWithoutOneFromAnEarlierGpipeIsAccepted) {
  const absl::StatusOr<pb::CheckpointManifest> parsed =
      ParseCheckpointManifest("format_version: 1 step: 2 applied_steps: 2", "m");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->step(), 2);
  const absl::Status wrong =
      ParseCheckpointManifest("format_version: 1 step: 2 manifest_crc32: 7", "m").status();
  EXPECT_EQ(wrong.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(wrong, "m: the manifest's checksum does not match")) << wrong;
}

TEST(ManifestStepTest, AStepDirectoryMustHoldItsOwnStep) {
  const std::string dir = FreshTempDir();
  WriteTwoStageCheckpoint(dir, 3);
  WriteTwoStageCheckpoint(dir, 4);
  // step-4's manifest copied over step-3's (checksum intact, step 4).
  fs::copy_file(dir + "/step-000000004/manifest.pbtxt", dir + "/step-000000003/manifest.pbtxt",
                fs::copy_options::overwrite_existing);
  const absl::Status status = ReadCheckpointManifest(dir + "/step-000000003/").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_TRUE(Contains(status,
                       "the manifest says step 4 but its directory is named "
                       "step-000000003"))
      << status;
  // A copy under another name is the user's: read as it is.
  fs::copy(dir + "/step-000000004", dir + "/before-the-change");
  EXPECT_EQ(ReadCheckpointManifest(dir + "/before-the-change")->step(), 4);
}

// A sharded optimizer state's tensor in parts: one entry per replica's element range.
pb::CheckpointTensor Part(const std::string& name, int64_t begin, int64_t end, int shard,
                          std::vector<int64_t> shape = {2, 5}) {
  pb::CheckpointTensor entry;
  entry.set_name(name);
  for (int64_t d : shape) entry.add_shape(d);
  entry.set_kind(pb::CheckpointTensor::OPTIMIZER_STATE);
  entry.set_shard(shard);
  entry.set_element_begin(begin);
  entry.set_element_end(end);
  return entry;
}

TEST(ManifestTest, ATensorInPartsMustBeCoveredExactlyOnce) {
  pb::CheckpointManifest manifest;
  manifest.set_format_version(kCheckpointFormatVersion);
  for (int r = 0; r < 2; ++r) {
    pb::CheckpointShard* shard = manifest.add_shards();
    shard->set_file(CheckpointShardName(0, 1, r));
    shard->set_replica(r);
  }
  const auto with = [&](std::vector<pb::CheckpointTensor> parts) {
    pb::CheckpointManifest m = manifest;
    for (pb::CheckpointTensor& part : parts) *m.add_tensors() = std::move(part);
    return ValidateCheckpointManifest(m, "m");
  };
  EXPECT_TRUE(with({Part("w:exp_avg", 5, 10, 1), Part("w:exp_avg", 0, 5, 0)}).ok());
  for (const auto& [what, parts] :
       std::vector<std::pair<std::string, std::vector<pb::CheckpointTensor>>>{
           {"a gap", {Part("w:exp_avg", 0, 4, 0), Part("w:exp_avg", 5, 10, 1)}},
           {"an overlap", {Part("w:exp_avg", 0, 6, 0), Part("w:exp_avg", 5, 10, 1)}},
           {"a repeat", {Part("w:exp_avg", 0, 10, 0), Part("w:exp_avg", 0, 10, 1)}},
           {"a part missing", {Part("w:exp_avg", 0, 5, 0)}},
           {"shapes that disagree",
            {Part("w:exp_avg", 0, 5, 0), Part("w:exp_avg", 5, 10, 1, {10, 1, 2})}},
           {"a range outside", {Part("w:exp_avg", 0, 5, 0), Part("w:exp_avg", 5, 11, 1)}}}) {
    SCOPED_TRACE(what);
    const absl::Status status = with(parts);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_TRUE(Contains(status, "'w:exp_avg'")) << status;
  }
  // A name saved whole and in parts.
  pb::CheckpointTensor whole = Part("w:exp_avg", 0, 10, 0);
  whole.clear_element_begin();
  whole.clear_element_end();
  EXPECT_EQ(with({whole, Part("w:exp_avg", 0, 10, 1)}).code(), absl::StatusCode::kDataLoss);
}

TEST(ReaderTest, ATensorSavedInPartsComesBackWhole) {
  const std::string dir = FreshTempDir();
  pb::CheckpointManifest manifest;
  manifest.set_format_version(kCheckpointFormatVersion);
  // Replica 0 holds elements [0, 4) of a [2, 3] tensor, replica 1 [4, 6).
  for (int r = 0; r < 2; ++r) {
    const std::vector<float> values =
        r == 0 ? std::vector<float>{0, 1, 2, 3} : std::vector<float>{4, 5};
    absl::StatusOr<pb::CheckpointShard> shard = WriteCheckpointShard(
        dir, 0, 1, {{"w:exp_avg", {static_cast<int64_t>(values.size())}, values}}, r);
    ASSERT_TRUE(shard.ok()) << shard.status();
    EXPECT_EQ(shard->file(),
              r == 0 ? "stage-000-of-001.safetensors" : "stage-000-of-001-replica-001.safetensors");
    *manifest.add_shards() = *shard;
    *manifest.add_tensors() = Part("w:exp_avg", r == 0 ? 0 : 4, r == 0 ? 4 : 6, r, {2, 3});
  }
  ASSERT_TRUE(ValidateCheckpointManifest(manifest, "m").ok());
  absl::StatusOr<std::vector<NamedTensorData>> read =
      ReadCheckpointTensors(dir, manifest, std::vector<std::string>{"w:exp_avg"});
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ((*read)[0].values, (std::vector<float>{0, 1, 2, 3, 4, 5}));
  // A part of another size than its range is refused naming it.
  manifest.mutable_tensors(1)->set_element_begin(3);
  const absl::Status status =
      ReadCheckpointTensors(dir, manifest, std::vector<std::string>{"w:exp_avg"}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_TRUE(Contains(status, "(elements [3, 6) of it)")) << status;
}

TEST(ManifestTest, AnEmptyManifestSaysSoNotAVersionMismatch) {
  const std::string dir = FreshTempDir();
  fs::create_directories(dir + "/step-000000002");
  for (const std::string& text : {std::string(""), std::string(" \n")}) {
    WriteText(dir + "/step-000000002/manifest.pbtxt", text);
    const absl::Status status = ReadCheckpointManifest(dir + "/step-000000002").status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(Contains(status, dir + "/step-000000002/manifest.pbtxt is empty (a checkpoint "
                                       "interrupted before its manifest was written?)"))
        << status;
  }
}

TEST(LatestPointerTest, OnlyARegularFileIsReadOrReplaced) {
  const std::string dir = FreshTempDir();
  WriteTwoStageCheckpoint(dir, 2);
  const std::string latest = dir + "/latest";
  const std::string elsewhere = dir + "/elsewhere";
  WriteText(elsewhere, "step-000000002\n");
  const auto expect_refused = [&](const std::string& kind) {
    for (const absl::Status& status :
         {CheckLatestPointer(dir), ReadLatestCheckpoint(dir).status(),
          WriteLatestCheckpoint(dir, "step-000000002"), PrepareCheckpoint(dir, 4).status()}) {
      EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
      EXPECT_TRUE(Contains(status, latest + " is " + kind)) << status;
    }
  };
  fs::remove(latest);
  fs::create_symlink(elsewhere, latest);
  expect_refused("a symbolic link");
  EXPECT_EQ(*ReadWholeFile(elsewhere), "step-000000002\n");  // not written through
  EXPECT_FALSE(fs::exists(dir + "/step-000000004"));         // nothing prepared
  fs::remove(latest);
  fs::create_directory(latest);
  expect_refused("a directory");
  fs::remove(latest);
  ASSERT_EQ(::mkfifo(latest.c_str(), 0644), 0);
  expect_refused("a FIFO");
  fs::remove(latest);
  EXPECT_TRUE(CheckLatestPointer(dir).ok());  // absent is fine
  EXPECT_TRUE(WriteLatestCheckpoint(dir, "step-000000002").ok());
  EXPECT_TRUE(CheckLatestPointer(dir).ok());
}

TEST(SymlinkLoopTest, ALoopIsNamedAsOneNotAsAMissingFile) {
  const std::string dir = FreshTempDir();
  WriteTwoStageCheckpoint(dir, 3);
  const std::string loop = dir + "/loop";
  fs::create_symlink(loop, loop);
  const auto expect_loop = [](const absl::Status& status) {
    EXPECT_FALSE(status.ok());
    EXPECT_TRUE(Contains(status, kLoop)) << status;
    EXPECT_FALSE(Contains(status, "does not exist")) << status;
    EXPECT_FALSE(Contains(status, "no such directory")) << status;
  };
  expect_loop(ReadLatestCheckpoint(loop).status());
  expect_loop(ResolveCheckpoint(loop, "").status());
  expect_loop(ResolveCheckpoint("latest", loop).status());
  expect_loop(ScanCheckpoints(loop).status());
  expect_loop(ReadCheckpointManifest(loop).status());
  EXPECT_TRUE(ListCheckpoints(loop).empty());

  // A step directory that loops; then a manifest and a shard that do.
  const std::string step5 = dir + "/step-000000005";
  fs::create_symlink(step5, step5);
  expect_loop(ScanCheckpoints(dir).status());
  EXPECT_EQ(ListCheckpoints(dir).size(), 1u);  // the loop left out, step 3 listed
  fs::remove(step5);
  const std::string checkpoint = dir + "/step-000000003";
  const pb::CheckpointManifest manifest = *ReadCheckpointManifest(checkpoint);
  const std::string shard = checkpoint + "/stage-001-of-002.safetensors";
  fs::remove(shard);
  fs::create_symlink(shard, shard);
  const std::vector<std::string> b = {"b"};
  const absl::Status read = ReadCheckpointTensors(checkpoint, manifest, b).status();
  EXPECT_EQ(read.code(), absl::StatusCode::kDataLoss);
  expect_loop(read);
  EXPECT_FALSE(Contains(read, "missing")) << read;
  const std::string manifest_path = checkpoint + "/manifest.pbtxt";
  fs::remove(manifest_path);
  fs::create_symlink(manifest_path, manifest_path);
  expect_loop(ReadCheckpointManifest(checkpoint).status());
  expect_loop(ResolveCheckpoint(checkpoint, "").status());
}

}  // namespace
}  // namespace gpipe
