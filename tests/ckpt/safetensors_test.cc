// Safetensors: round trips, files written by the reference `safetensors` package
// (testdata/, made by testdata/make_safetensors_fixtures.py), and rejection of corrupt files.
#include "runtime/ckpt/safetensors.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/core/file_io.h"
#include "tests/support/scratch_dir.h"
#include "zlib.h"

namespace gpipe {
namespace {

std::string FreshTempDir() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path dir = std::filesystem::path(::gpipe::testing::ProcessScratchDir()) /
                                    "gpipe_ckpt" /
                                    (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

std::string Testdata(const std::string& name) {
  return std::string(GPIPE_CKPT_TESTDATA_DIR) + "/" + name;
}

// A file from a header text (padded to 8 bytes unless `pad` is false) and raw data bytes.
std::string FileBytes(std::string header, const std::string& data, bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  const uint64_t length = header.size();
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &length, 8);
  return bytes + header + data;
}

std::string FloatBytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4);
}

void ExpectRejected(const std::string& bytes, const std::string& fragment) {
  absl::StatusOr<SafetensorsContents> contents = ParseSafetensors(bytes, "bad.safetensors");
  ASSERT_FALSE(contents.ok()) << "accepted; expected: " << fragment;
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(contents.status().message().find("bad.safetensors: "), std::string::npos)
      << contents.status();
  EXPECT_NE(contents.status().message().find(fragment), std::string::npos) << contents.status();
}

const std::vector<NamedTensorData> kModel = {
    {"fc1.weight", {2, 3}, {0.5f, -1.0f, 2.0f, 1e-30f, -0.0f, 3.25f}},
    {"fc1.bias", {2}, {0.125f, -7.0f}},
    {"scalar", {}, {42.0f}},
    {"nothing", {0, 4}, {}},
    {"layer \"quoted\"\n\xC3\xA9", {1, 1, 1}, {9.0f}},
};

void ExpectSameTensors(const std::vector<NamedTensorData>& actual,
                       const std::vector<NamedTensorData>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(actual[i].name, expected[i].name);
    EXPECT_EQ(actual[i].shape, expected[i].shape) << expected[i].name;
    EXPECT_EQ(actual[i].values, expected[i].values) << expected[i].name;
  }
}

TEST(SafetensorsTest, RoundTripKeepsNamesShapesValuesOrderAndMetadata) {
  const std::string path = FreshTempDir() + "/model.safetensors";
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"step", "12"}, {"quote\"", "back\\slash"}};
  ASSERT_TRUE(WriteSafetensors(path, kModel, metadata).ok());
  absl::StatusOr<SafetensorsContents> contents = ReadSafetensorsWithMetadata(path);
  ASSERT_TRUE(contents.ok()) << contents.status();
  ExpectSameTensors(contents->tensors, kModel);
  EXPECT_EQ(contents->metadata, metadata);
  absl::StatusOr<std::vector<NamedTensorData>> tensors = ReadSafetensors(path);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ExpectSameTensors(*tensors, kModel);
}

TEST(SafetensorsTest, WrittenFileFollowsTheSpecLayout) {
  const std::string path = FreshTempDir() + "/small.safetensors";
  ASSERT_TRUE(
      WriteSafetensors(path, {{"w", {2}, {1.0f, 2.0f}}, {"b", {1}, {3.0f}}}, {{"format", "pt"}})
          .ok());
  const std::string bytes = ReadFile(path);
  uint64_t header_length;
  std::memcpy(&header_length, bytes.data(), 8);
  EXPECT_EQ(header_length % 8, 0u);
  const std::string expected_header =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
  ASSERT_EQ(header_length, (expected_header.size() + 7) / 8 * 8);
  EXPECT_EQ(bytes.substr(8, expected_header.size()), expected_header);
  EXPECT_EQ(bytes.substr(8 + expected_header.size(), header_length - expected_header.size()),
            std::string(header_length - expected_header.size(), ' '));
  EXPECT_EQ(bytes.substr(8 + header_length), FloatBytes({1.0f, 2.0f, 3.0f}));
}

TEST(SafetensorsTest, WriteReplacesAnExistingFileAndLeavesNoTemporaries) {
  const std::string dir = FreshTempDir();
  const std::string path = dir + "/m.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, {{"a", {1}, {1.0f}}}, {}).ok());
  ASSERT_TRUE(WriteSafetensors(path, {{"b", {2}, {2.0f, 3.0f}}}, {}).ok());
  absl::StatusOr<std::vector<NamedTensorData>> tensors = ReadSafetensors(path);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ExpectSameTensors(*tensors, {{"b", {2}, {2.0f, 3.0f}}});
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "m.safetensors");
  }
  EXPECT_EQ(files, 1);
}

TEST(SafetensorsTest, EmptyFileHasEmptyHeader) {
  const std::string path = FreshTempDir() + "/empty.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, {}, {}).ok());
  EXPECT_EQ(ReadFile(path), FileBytes("{}", ""));
  absl::StatusOr<std::vector<NamedTensorData>> tensors = ReadSafetensors(path);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  EXPECT_TRUE(tensors->empty());
}

TEST(SafetensorsTest, ReadsFileWrittenByTheSafetensorsPackage) {
  absl::StatusOr<SafetensorsContents> contents =
      ReadSafetensorsWithMetadata(Testdata("reference_f32.safetensors"));
  ASSERT_TRUE(contents.ok()) << contents.status();
  // In data order; the package sorts tensors by name ("empty" has no bytes at offset 0).
  ExpectSameTensors(contents->tensors,
                    {{"empty", {0, 3}, {}},
                     {"fc1.bias", {2}, {1.5f, -2.0f}},
                     {"fc1.weight", {2, 3}, {-0.5f, -0.25f, 0.0f, 0.25f, 0.5f, 0.75f}},
                     {"fc2.weight", {1, 2}, {3.0f, -1.0f}},
                     {"scale", {}, {0.125f}}});
  EXPECT_EQ(contents->metadata, (std::map<std::string, std::string>{
                                    {"format", "pt"}, {"note", "made by safetensors"}}));
}

TEST(SafetensorsTest, ReadsTheReferenceF16FileAsF32) {
  absl::StatusOr<std::vector<NamedTensorData>> tensors =
      ReadSafetensors(Testdata("reference_f16.safetensors"));
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_EQ(tensors->size(), 2u);
  EXPECT_EQ((*tensors)[0].name, "b");
  EXPECT_EQ((*tensors)[0].values, std::vector<float>{0.5f});
  EXPECT_EQ((*tensors)[1].name, "w");
  EXPECT_EQ((*tensors)[1].shape, std::vector<int64_t>{2});
  EXPECT_EQ((*tensors)[1].values, (std::vector<float>{1.0f, 2.0f}));
}

// Every class of binary16 and bfloat16 value widens exactly: normals, subnormals (the smallest
// too), signed zeros, infinities and NaN.
TEST(SafetensorsTest, Bf16AndF16WidenExactly) {
  const std::vector<uint16_t> half = {0x3c00, 0xc000, 0x7bff, 0x0400, 0x03ff, 0x0001,
                                      0x8000, 0x7c00, 0xfc00, 0x7e00, 0x3555};
  const std::vector<float> half_values = {1.0f,
                                          -2.0f,
                                          65504.0f,
                                          std::ldexp(1.0f, -14),
                                          std::ldexp(1023.0f, -24),
                                          std::ldexp(1.0f, -24),
                                          -0.0f,
                                          std::numeric_limits<float>::infinity(),
                                          -std::numeric_limits<float>::infinity(),
                                          std::numeric_limits<float>::quiet_NaN(),
                                          std::ldexp(1365.0f, -12)};
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc0a0, 0x0001, 0x7f80, 0x8000};
  const std::vector<float> bf16_values = {1.0f, -5.0f, std::ldexp(1.0f, -133),
                                          std::numeric_limits<float>::infinity(), -0.0f};
  std::string data(reinterpret_cast<const char*>(half.data()), half.size() * 2);
  data.append(reinterpret_cast<const char*>(bf16.data()), bf16.size() * 2);
  const std::string header = std::string(
      "{\"h\":{\"dtype\":\"F16\",\"shape\":[11],\"data_offsets\":[0,22]},"
      "\"b\":{\"dtype\":\"BF16\",\"shape\":[5],\"data_offsets\":[22,32]}}");
  absl::StatusOr<SafetensorsContents> contents =
      ParseSafetensors(FileBytes(header, data), "mixed.safetensors");
  ASSERT_TRUE(contents.ok()) << contents.status();
  ASSERT_EQ(contents->tensors.size(), 2u);
  const std::vector<float>& h = contents->tensors[0].values;
  const std::vector<float>& b = contents->tensors[1].values;
  ASSERT_EQ(h.size(), half_values.size());
  for (size_t i = 0; i < h.size(); ++i) {
    if (std::isnan(half_values[i])) {
      EXPECT_TRUE(std::isnan(h[i])) << i;
    } else {
      EXPECT_EQ(h[i], half_values[i]) << "element " << i;
      EXPECT_EQ(std::signbit(h[i]), std::signbit(half_values[i])) << i;
    }
  }
  ASSERT_EQ(b.size(), bf16_values.size());
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(b[i], bf16_values[i]) << "element " << i;
    EXPECT_EQ(std::signbit(b[i]), std::signbit(bf16_values[i])) << i;
  }
  // The byte count is checked at the dtype's width.
  ExpectRejected(FileBytes("{\"a\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,4]}}",
                           std::string(4, '\0')),
                 "data_offsets [0, 4) hold 4 bytes but shape [3] of BF16 needs 6");
}

TEST(SafetensorsTest, Bf16WritesRoundToNearestEvenAndReadBack) {
  const std::string path = FreshTempDir() + "/bf16.safetensors";
  // 1 + 2^-8 is a tie (rounds to even: 1), 1 + 3 * 2^-8 rounds up to 1 + 2^-6, 1 + 2^-7 is exact.
  const std::vector<float> values = {1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8),
                                     1.0f + std::ldexp(1.0f, -7), -3.0f};
  ASSERT_TRUE(WriteSafetensors(path, {{"w", {2, 2}, values}, {"b", {1}, {0.5f}}}, {},
                               SafetensorsDtype::kBF16)
                  .ok());
  const std::string bytes = ReadFile(path);
  EXPECT_NE(bytes.find("\"dtype\":\"BF16\""), std::string::npos);
  absl::StatusOr<std::vector<NamedTensorData>> read = ReadSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[0].name, "w");
  EXPECT_EQ((*read)[0].values, (std::vector<float>{1.0f, 1.0f + std::ldexp(1.0f, -6),
                                                   1.0f + std::ldexp(1.0f, -7), -3.0f}));
  EXPECT_EQ((*read)[1].values, std::vector<float>{0.5f});
  // Header, then 5 values of 2 bytes.
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  EXPECT_EQ(bytes.size(), 8 + header + 10);
}

TEST(SafetensorsTest, OtherDtypesAreRejectedNamingTensorAndDtype) {
  absl::StatusOr<SafetensorsContents> contents = ParseSafetensors(
      FileBytes("{\"ids\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}",
                std::string(8, '\0')),
      "ids.safetensors");
  ASSERT_FALSE(contents.ok());
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(contents.status().message().find(
                "ids.safetensors: tensor \"ids\" has dtype I64; gpipe reads F32, BF16 and F16 "
                "tensors (as f32)"),
            std::string::npos)
      << contents.status();
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  const std::string path = FreshTempDir() + "/none.safetensors";
  absl::StatusOr<std::vector<NamedTensorData>> tensors = ReadSafetensors(path);
  EXPECT_EQ(tensors.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(tensors.status().message().find(path), std::string::npos) << tensors.status();
}

TEST(SafetensorsTest, RejectsCorruptHeaderLength) {
  ExpectRejected("", "too short for the 8-byte header length");
  ExpectRejected("\x02\0\0", "too short");
  // Claims 64 header bytes, has 8.
  std::string bytes = FileBytes("{}", "");
  bytes[0] = 64;
  ExpectRejected(bytes, "the header length is 64 bytes but only 8 bytes follow it");
  bytes = FileBytes("{}", "");
  bytes[7] = 1;  // 2^56 + 8
  ExpectRejected(bytes, "more than the limit");
}

TEST(SafetensorsTest, RejectsHeadersThatAreNotJson) {
  ExpectRejected(FileBytes("not json", ""), "the header does not start with '{'");
  ExpectRejected(
      FileBytes("{\"a\": {\"dtype\": \"F32\",", ""),
      "the header is not valid JSON (line 1, column 25): syntax error while parsing object "
      "key - unexpected end of input");
  ExpectRejected(FileBytes("{} trailing", ""), "the header is not valid JSON (line 1, column");
  ExpectRejected(FileBytes("{} []", ""), "expected end of input");
  ExpectRejected(FileBytes(std::string("{}\0\0\0\0\0\0", 8), "", false),
                 "the header is not valid JSON (byte 2): a NUL byte");
  ExpectRejected(FileBytes("{\"a\": 1, \"a\": 2}", ""), "duplicate object key \"a\"");
  ExpectRejected(FileBytes(std::string(200, '[').insert(0, "{\"a\":"), ""),
                 "nesting deeper than 64 levels");
  ExpectRejected(FileBytes("{\"a\": 1}", ""), "tensor \"a\" is a JSON number");
}

TEST(SafetensorsTest, RejectsBadEntries) {
  const std::string four = FloatBytes({1.0f});
  ExpectRejected(FileBytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", four),
                 "tensor \"a\" lacks one of dtype, shape, data_offsets");
  ExpectRejected(
      FileBytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", four),
      "tensor \"a\" has an unknown field \"x\"");
  ExpectRejected(
      FileBytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", four),
      "shape entries must be non-negative integers");
  ExpectRejected(
      FileBytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", four),
      "shape entries must be non-negative integers");
  ExpectRejected(
      FileBytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", four),
      "data_offsets must be integers with 0 <= begin <= end");
  ExpectRejected(
      FileBytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", four),
      "tensor \"a\": data_offsets [0, 4) hold 4 bytes but shape [2] of F32 needs 8");
  ExpectRejected(FileBytes("{\"__metadata__\":{\"k\":1}}", ""),
                 "__metadata__ value of \"k\" is not a string");
  ExpectRejected(
      FileBytes("{\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,4]}}", four),
      "tensor \"a\" has dtype I32");
}

TEST(SafetensorsTest, RejectsOffsetsPastTheEndOfTheData) {
  ExpectRejected(FileBytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                           FloatBytes({1.0f})),
                 "tensor \"a\" has data_offsets [0, 8) past the end of the data (4 bytes)");
}

TEST(SafetensorsTest, RejectsOverlappingRanges) {
  ExpectRejected(FileBytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                           FloatBytes({1, 2, 3})),
                 "the data of tensors \"a\" and \"b\" overlap");
}

TEST(SafetensorsTest, RejectsGapsAndUncoveredTrailingData) {
  ExpectRejected(FileBytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                           FloatBytes({1, 2})),
                 "bytes [0, 4) of the data belong to no tensor");
  ExpectRejected(FileBytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                           FloatBytes({1, 2})),
                 "4 bytes at the end of the data belong to no tensor");
}

TEST(SafetensorsTest, RejectsDuplicateNamesInTheHeader) {
  ExpectRejected(FileBytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                           "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                           FloatBytes({1, 2})),
                 "duplicate object key \"a\"");
}

TEST(SafetensorsTest, WriteRejectsDuplicateReservedAndMismatchedTensors) {
  const std::string path = FreshTempDir() + "/bad.safetensors";
  absl::Status status = WriteSafetensors(path, {{"w", {1}, {1}}, {"w", {1}, {2}}}, {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("duplicate tensor name \"w\""), std::string::npos) << status;
  status = WriteSafetensors(path, {{"__metadata__", {1}, {1}}}, {}).status();
  EXPECT_NE(status.message().find("\"__metadata__\" is reserved"), std::string::npos) << status;
  status = WriteSafetensors(path, {{"w", {2, 2}, {1, 2, 3}}}, {}).status();
  EXPECT_NE(status.message().find("tensor \"w\" has shape [2, 2] but 3 values"), std::string::npos)
      << status;
  status = WriteSafetensors(path, {{"w", {-1}, {}}}, {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  status = WriteSafetensors(path, {{"bad\xFFutf8", {1}, {1}}}, {}).status();
  EXPECT_NE(status.message().find("must be valid UTF-8"), std::string::npos) << status;
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SafetensorsTest, WriteIntoMissingDirectoryNamesThePath) {
  const std::string path = FreshTempDir() + "/no/dir/m.safetensors";
  absl::Status status = WriteSafetensors(path, {{"w", {1}, {1}}}, {}).status();
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(path), std::string::npos) << status;
}

TEST(SafetensorsTest, WriteReportsTheFilesSizeAndCrc32) {
  const std::string path = FreshTempDir() + "/m.safetensors";
  absl::StatusOr<WrittenFile> written =
      WriteSafetensors(path, {{"w", {2}, {1.0f, 2.0f}}}, {{"format", "pt"}});
  ASSERT_TRUE(written.ok()) << written.status();
  const absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(written->bytes, static_cast<int64_t>(bytes->size()));
  // zlib's own CRC-32 of the file as read back.
  EXPECT_EQ(written->crc32,
            static_cast<uint32_t>(::crc32(0L, reinterpret_cast<const Bytef*>(bytes->data()),
                                          static_cast<uInt>(bytes->size()))));
}

TEST(SafetensorsTest, WriteReplacesOnlyRegularFilesAndFollowsLinks) {
  const std::string dir = FreshTempDir();
  const std::string fifo = dir + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const absl::Status refused = WriteSafetensors(fifo, {{"w", {1}, {1}}}, {}).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_NE(refused.message().find("is a FIFO; gpipe replaces only regular files"),
            std::string::npos)
      << refused;
  struct stat info;
  ASSERT_EQ(::lstat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode)) << "the FIFO was replaced";

  // A link to a regular file: the target is replaced, the link stays.
  const std::string target = dir + "/target.safetensors";
  const std::string link = dir + "/link.safetensors";
  ASSERT_TRUE(WriteSafetensors(target, {{"a", {1}, {1}}}, {}).ok());
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_TRUE(WriteSafetensors(link, {{"b", {1}, {2}}}, {}).ok());
  ASSERT_EQ(::lstat(link.c_str(), &info), 0);
  EXPECT_TRUE(S_ISLNK(info.st_mode));
  const absl::StatusOr<std::vector<NamedTensorData>> read = ReadSafetensors(target);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].name, "b");
}

}  // namespace
}  // namespace gpipe
