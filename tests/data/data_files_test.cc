#include "runtime/data/data_files.h"

#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/support/file_fixtures.h"

namespace gpipe {
namespace {

using ::testing::HasSubstr;

pb::Plan NpyPlan(const std::string& inputs, const std::string& targets) {
  pb::Plan plan;
  plan.mutable_data()->mutable_npy()->set_inputs(inputs);
  plan.mutable_data()->mutable_npy()->set_targets(targets);
  return plan;
}

TEST(DataFilesTest, ListsEveryFileWithItsField) {
  pb::Plan plan;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "data { text { paths: \"a.txt\" paths: \"b.txt\" } }", &plan));
  const std::vector<FileRole> files = DataFiles(plan);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[1].role, "data.text.paths[1]");
  EXPECT_EQ(files[1].path, "b.txt");
  EXPECT_EQ(DataFiles(NpyPlan("x.npy", "y.npy")).size(), 2u);
  plan.mutable_data()->mutable_synthetic();
  EXPECT_TRUE(DataFiles(plan).empty());
}

TEST(DataFilesTest, FingerprintSeesAChangeAnywhereItSamplesAndOnlyThen) {
  const std::string dir = testing::FreshTempDir();
  // 4 MiB: sampled, not read whole.
  std::string bytes(4 << 20, 'a');
  testing::WriteFile(dir + "/x.npy", bytes);
  testing::WriteFile(dir + "/y.npy", "targets");
  const pb::Plan plan = NpyPlan(dir + "/x.npy", dir + "/y.npy");
  absl::StatusOr<std::string> first = DataFingerprint(plan);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(*first, HasSubstr("data.npy.inputs: 4194304 bytes, crc32 0x"));
  EXPECT_THAT(*first, HasSubstr("data.npy.targets: 7 bytes"));
  EXPECT_EQ(*DataFingerprint(plan), *first);
  // The last byte is in the last piece; the middle of the file in one of the pieces between.
  for (size_t at : {bytes.size() - 1, size_t{0}, bytes.size() / 15 * 7}) {
    std::string changed = bytes;
    changed[at] = 'b';
    testing::WriteFile(dir + "/x.npy", changed);
    EXPECT_NE(*DataFingerprint(plan), *first) << at;
  }
  // Another size is another fingerprint even with equal samples.
  testing::WriteFile(dir + "/x.npy", bytes + "a");
  EXPECT_NE(*DataFingerprint(plan), *first);
}

TEST(DataFilesTest, SyntheticDataIsFingerprintedByItsSettings) {
  pb::Plan plan;
  plan.mutable_data()->mutable_synthetic()->set_num_samples(64);
  const std::string a = *DataFingerprint(plan);
  plan.mutable_data()->mutable_synthetic()->set_noise(0.25);
  EXPECT_NE(*DataFingerprint(plan), a);
  EXPECT_THAT(a, HasSubstr("data.synthetic: num_samples: 64"));
}

TEST(DataFilesTest, AMissingFileIsNamedWithItsField) {
  const absl::StatusOr<std::string> missing = DataFingerprint(NpyPlan("/nonexistent/x.npy", "y"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("data.npy.inputs: /nonexistent/x.npy"));
}

}  // namespace
}  // namespace gpipe
