// MetricsWriter: one flushed JSON line per record, truncation on open, open errors.
#include "runtime/train/metrics_writer.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/support/file_fixtures.h"

namespace gpipe {
namespace {

using ::gpipe::testing::FreshTempDir;
using ::gpipe::testing::ReadFile;
using ::gpipe::testing::WriteFile;

TEST(MetricsWriterTest, WritesOneFlushedLinePerRecord) {
  const std::string path = FreshTempDir() + "/metrics.jsonl";
  absl::StatusOr<std::unique_ptr<MetricsWriter>> writer = MetricsWriter::Open(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->path(), path);
  EXPECT_EQ(ReadFile(path), "");
  ASSERT_TRUE((*writer)->Write(Json{{"step", 0}, {"loss", 2.5}}).ok());
  // Visible to another reader before the writer is closed.
  EXPECT_EQ(ReadFile(path), "{\"step\":0,\"loss\":2.5}\n");
  ASSERT_TRUE((*writer)->Write(Json{{"step", 1}, {"note", "two\nlines"}}).ok());
  EXPECT_EQ(ReadFile(path), "{\"step\":0,\"loss\":2.5}\n{\"step\":1,\"note\":\"two\\nlines\"}\n");
}

TEST(MetricsWriterTest, OpenTruncatesAnExistingFile) {
  const std::string path = FreshTempDir() + "/metrics.jsonl";
  WriteFile(path, "{\"old\":1}\n{\"old\":2}\n");
  absl::StatusOr<std::unique_ptr<MetricsWriter>> writer = MetricsWriter::Open(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ(ReadFile(path), "");
  ASSERT_TRUE((*writer)->Write(Json{{"new", 1}}).ok());
  writer->reset();
  EXPECT_EQ(ReadFile(path), "{\"new\":1}\n");
}

TEST(MetricsWriterTest, OpenInMissingDirectoryNamesThePath) {
  const std::string path = FreshTempDir() + "/missing/metrics.jsonl";
  absl::StatusOr<std::unique_ptr<MetricsWriter>> writer = MetricsWriter::Open(path);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(writer.status().message().find("cannot open metrics file " + path), std::string::npos)
      << writer.status();
}

TEST(MetricsWriterTest, WriteErrorIsReported) {
  // /dev/full accepts the open and fails every write with ENOSPC.
  absl::StatusOr<std::unique_ptr<MetricsWriter>> writer = MetricsWriter::Open("/dev/full");
  if (!writer.ok()) GTEST_SKIP() << "no /dev/full here";
  absl::Status status = (*writer)->Write(Json{{"step", 0}});
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("writing metrics file /dev/full failed"), std::string::npos)
      << status;
}

}  // namespace
}  // namespace gpipe
