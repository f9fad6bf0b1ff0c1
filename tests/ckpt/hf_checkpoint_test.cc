// HfCheckpoint: the three layouts save_pretrained writes (one file, a directory with
// model.safetensors, an index with shards), BF16 tensors widened, and every disagreement between
// an index and its shards refused naming the files.
#include "runtime/ckpt/hf_checkpoint.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/core/file_io.h"
#include "tests/support/file_fixtures.h"

namespace gpipe {
namespace {

using ::gpipe::testing::FreshTempDir;
using ::gpipe::testing::WriteFile;

void Write(const std::string& path, const std::vector<NamedTensorData>& tensors) {
  ASSERT_TRUE(WriteSafetensors(path, tensors, {{"format", "pt"}}).ok()) << path;
}

// A one-tensor BF16 file: `name` of shape [n] holding 1, 2, ... n.
void WriteBf16(const std::string& path, const std::string& name, int n) {
  std::string header = "{\"" + name + "\":{\"dtype\":\"BF16\",\"shape\":[" + std::to_string(n) +
                       "],\"data_offsets\":[0," + std::to_string(2 * n) + "]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  const uint64_t length = header.size();
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &length, 8);
  bytes += header;
  for (int i = 1; i <= n; ++i) {
    const float value = static_cast<float>(i);
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    const uint16_t top = static_cast<uint16_t>(bits >> 16);  // exact for small integers
    bytes.append(reinterpret_cast<const char*>(&top), 2);
  }
  WriteFile(path, bytes);
}

const std::vector<NamedTensorData> kFirst = {{"model.embed_tokens.weight", {2, 2}, {1, 2, 3, 4}},
                                             {"model.norm.weight", {2}, {0.5f, 0.25f}}};

TEST(HfCheckpointTest, OneFileAndADirectoryHoldingModelSafetensors) {
  const std::string dir = FreshTempDir();
  Write(dir + "/model.safetensors", kFirst);
  for (const std::string& path : {dir + "/model.safetensors", dir}) {
    absl::StatusOr<HfCheckpoint> checkpoint = HfCheckpoint::Open(path);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    ASSERT_EQ(checkpoint->tensors().size(), 2u);
    EXPECT_EQ(checkpoint->tensors()[0].name, "model.embed_tokens.weight");
    EXPECT_EQ(checkpoint->tensors()[0].shape, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(checkpoint->tensors()[0].file, dir + "/model.safetensors");
    absl::StatusOr<NamedTensorData> norm = checkpoint->Read("model.norm.weight");
    ASSERT_TRUE(norm.ok());
    EXPECT_EQ(norm->values, (std::vector<float>{0.5f, 0.25f}));
    EXPECT_EQ(checkpoint->Read("lm_head.weight").status().code(), absl::StatusCode::kNotFound);
  }
}

TEST(HfCheckpointTest, AnIndexSpreadsTensorsOverShardsOfAnyDtype) {
  const std::string dir = FreshTempDir();
  Write(dir + "/model-00001-of-00002.safetensors", kFirst);
  WriteBf16(dir + "/model-00002-of-00002.safetensors", "lm_head.weight", 6);
  WriteFile(dir + "/model.safetensors.index.json",
            R"({"metadata": {"total_size": 36}, "weight_map": {
                 "lm_head.weight": "model-00002-of-00002.safetensors",
                 "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                 "model.norm.weight": "model-00001-of-00002.safetensors"}})");
  for (const std::string& path : {dir, dir + "/model.safetensors.index.json"}) {
    absl::StatusOr<HfCheckpoint> checkpoint = HfCheckpoint::Open(path);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    ASSERT_EQ(checkpoint->tensors().size(), 3u);
    EXPECT_EQ(checkpoint->tensors()[0].name, "lm_head.weight");
    EXPECT_EQ(checkpoint->tensors()[0].dtype, "BF16");
    EXPECT_EQ(checkpoint->tensors()[0].file, dir + "/model-00002-of-00002.safetensors");
    absl::StatusOr<NamedTensorData> head = checkpoint->Read("lm_head.weight");
    ASSERT_TRUE(head.ok());
    EXPECT_EQ(head->values, (std::vector<float>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(checkpoint->Read("model.embed_tokens.weight")->values,
              (std::vector<float>{1, 2, 3, 4}));
  }
}

void ExpectOpenFails(const std::string& path, absl::StatusCode code, const std::string& text) {
  absl::StatusOr<HfCheckpoint> checkpoint = HfCheckpoint::Open(path);
  ASSERT_FALSE(checkpoint.ok()) << "expected: " << text;
  EXPECT_EQ(checkpoint.status().code(), code) << checkpoint.status();
  EXPECT_NE(checkpoint.status().message().find(text), std::string::npos) << checkpoint.status();
}

TEST(HfCheckpointTest, RefusesIndexesThatDisagreeWithTheirShards) {
  const std::string dir = FreshTempDir();
  ExpectOpenFails(dir, absl::StatusCode::kNotFound,
                  dir +
                      " is a directory without model.safetensors or "
                      "model.safetensors.index.json");
  Write(dir + "/a.safetensors", kFirst);
  WriteBf16(dir + "/b.safetensors", "lm_head.weight", 2);
  const std::string index = dir + "/model.safetensors.index.json";
  WriteFile(index, R"({"weight_map": {"model.norm.weight": "a.safetensors",
                                      "model.embed_tokens.weight": "a.safetensors",
                                      "lm_head.weight": "c.safetensors"}})");
  ExpectOpenFails(dir, absl::StatusCode::kNotFound,
                  index + " names shard c.safetensors: cannot open " + dir + "/c.safetensors");
  WriteFile(index, R"({"weight_map": {"model.norm.weight": "a.safetensors",
                                      "lm_head.weight": "b.safetensors"}})");
  ExpectOpenFails(dir, absl::StatusCode::kInvalidArgument,
                  dir + "/a.safetensors holds \"model.embed_tokens.weight\" but " + index +
                      "'s weight_map does not list it");
  WriteFile(index, R"({"weight_map": {"model.norm.weight": "a.safetensors",
                                      "model.embed_tokens.weight": "a.safetensors",
                                      "lm_head.weight": "a.safetensors",
                                      "x": "b.safetensors"}})");
  ExpectOpenFails(dir, absl::StatusCode::kInvalidArgument,
                  index + ": weight_map puts \"lm_head.weight\" in a.safetensors but " + dir +
                      "/a.safetensors holds no such tensor");
  Write(dir + "/b.safetensors", {{"model.norm.weight", {1}, {1}}});
  WriteFile(index, R"({"weight_map": {"model.norm.weight": "b.safetensors",
                                      "model.embed_tokens.weight": "a.safetensors"}})");
  ExpectOpenFails(dir, absl::StatusCode::kInvalidArgument,
                  "tensor \"model.norm.weight\" is in both " + dir + "/a.safetensors and " + dir +
                      "/b.safetensors");
  WriteFile(index, R"({"tensors": {}})");
  ExpectOpenFails(dir, absl::StatusCode::kInvalidArgument,
                  index + ": not a safetensors index: it needs a \"weight_map\" object");
  WriteFile(index, R"({"weight_map": {"a": "../a.safetensors"}})");
  ExpectOpenFails(index, absl::StatusCode::kInvalidArgument,
                  "weight_map[\"a\"] must name a shard file beside the index");
}

}  // namespace
}  // namespace gpipe
