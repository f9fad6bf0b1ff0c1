// .npy reading and writing: round trips, numpy-written fixtures (testdata/, made by
// testdata/make_npy_fixtures.py), hand-made headers, and every rejection.
#include "runtime/data/npy.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/file_fixtures.h"

namespace gpipe {
namespace {

using ::gpipe::testing::FreshTempDir;
using ::gpipe::testing::ReadFile;
using ::gpipe::testing::TestdataPath;
using ::gpipe::testing::WriteFile;

// A v1.0 file: magic, version, 2-byte header length, `header`, then `data`.
std::string NpyV1(const std::string& header, const std::string& data) {
  std::string bytes = "\x93NUMPY";
  bytes.push_back(1);
  bytes.push_back(0);
  bytes.push_back(static_cast<char>(header.size() & 0xFF));
  bytes.push_back(static_cast<char>(header.size() >> 8));
  return bytes + header + data;
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

void ExpectRejected(const std::string& bytes, const std::string& fragment) {
  absl::StatusOr<NpyArray> array = ParseNpy(bytes, "some/file.npy");
  ASSERT_FALSE(array.ok()) << "expected an error containing: " << fragment;
  EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(array.status().message().find("some/file.npy: "), std::string::npos) << array.status();
  EXPECT_NE(array.status().message().find(fragment), std::string::npos) << array.status();
}

TEST(NpyTest, Float32RoundTripKeepsShapeAndValues) {
  const std::string path = FreshTempDir() + "/x.npy";
  const std::vector<float> values = {1.5f, -2.25f, 0.0f, 3.0e-8f, 1e30f, -0.0f};
  ASSERT_TRUE(WriteNpy(path, Shape{3, 1, 2}, values).ok());
  absl::StatusOr<NpyArray> array = ReadNpy(path);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->dtype, DType::kF32);
  EXPECT_EQ(array->shape, (Shape{3, 1, 2}));
  EXPECT_EQ(array->f32, values);
  EXPECT_TRUE(array->i64.empty());
}

TEST(NpyTest, Int64RoundTripKeepsShapeAndValues) {
  const std::string path = FreshTempDir() + "/y.npy";
  const std::vector<int64_t> values = {0, -1, int64_t{1} << 40, 9};
  ASSERT_TRUE(WriteNpy(path, Shape{4}, values).ok());
  absl::StatusOr<NpyArray> array = ReadNpy(path);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->dtype, DType::kI64);
  EXPECT_EQ(array->shape, (Shape{4}));
  EXPECT_EQ(array->i64, values);
}

TEST(NpyTest, WrittenFileHasNumpysLayout) {
  const std::string path = FreshTempDir() + "/z.npy";
  ASSERT_TRUE(WriteNpy(path, Shape{2, 3}, std::vector<float>{0, 1, 2, 3, 4, 5}).ok());
  const std::string bytes = ReadFile(path);
  // Same header as numpy's np.save of a float32 (2, 3) array (testdata/f32_2x3.npy).
  const std::string numpy_bytes = ReadFile(TestdataPath("f32_2x3.npy"));
  ASSERT_EQ(bytes.size(), numpy_bytes.size());
  EXPECT_EQ(bytes.substr(0, 128), numpy_bytes.substr(0, 128));
  EXPECT_EQ(bytes.size() - 6 * 4, 128u);
}

TEST(NpyTest, WriteOneDimensionalAndScalarShapesLikeNumpy) {
  const std::string dir = FreshTempDir();
  ASSERT_TRUE(WriteNpy(dir + "/v.npy", Shape{5}, std::vector<int64_t>{1, 2, 3, 4, 5}).ok());
  EXPECT_NE(ReadFile(dir + "/v.npy").find("'shape': (5,), }"), std::string::npos);
  ASSERT_TRUE(WriteNpy(dir + "/s.npy", Shape{}, std::vector<float>{2.5f}).ok());
  // numpy's own scalar file has the same header.
  EXPECT_EQ(ReadFile(dir + "/s.npy"), ReadFile(TestdataPath("f32_scalar.npy")));
}

TEST(NpyTest, WriteRejectsValueCountNotMatchingShape) {
  const std::string path = FreshTempDir() + "/bad.npy";
  absl::Status status = WriteNpy(path, Shape{2, 2}, std::vector<float>{1, 2, 3});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("shape [2, 2] needs 4 values, got 3"), std::string::npos)
      << status;
}

TEST(NpyTest, WriteIntoMissingDirectoryNamesThePath) {
  const std::string path = FreshTempDir() + "/no/such/dir/x.npy";
  absl::Status status = WriteNpy(path, Shape{1}, std::vector<float>{1});
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(path), std::string::npos) << status;
}

TEST(NpyTest, ReadsFilesWrittenByNumpy) {
  const std::vector<float> expected = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
  for (const char* name : {"f32_2x3.npy", "f32_2x3_v2.npy", "f32_2x3_v3.npy"}) {
    absl::StatusOr<NpyArray> array = ReadNpy(TestdataPath(name));
    ASSERT_TRUE(array.ok()) << name << ": " << array.status();
    EXPECT_EQ(array->dtype, DType::kF32) << name;
    EXPECT_EQ(array->shape, (Shape{2, 3})) << name;
    EXPECT_EQ(array->f32, expected) << name;
  }
  absl::StatusOr<NpyArray> scalar = ReadNpy(TestdataPath("f32_scalar.npy"));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ(scalar->shape, Shape{});
  EXPECT_EQ(scalar->f32, std::vector<float>{2.5f});
}

TEST(NpyTest, ReadsNumpyInt64AndWidensInt32) {
  absl::StatusOr<NpyArray> i64 = ReadNpy(TestdataPath("i64_4.npy"));
  ASSERT_TRUE(i64.ok()) << i64.status();
  EXPECT_EQ(i64->dtype, DType::kI64);
  EXPECT_EQ(i64->i64, (std::vector<int64_t>{3, 0, 2, 1}));
  absl::StatusOr<NpyArray> i32 = ReadNpy(TestdataPath("i32_4.npy"));
  ASSERT_TRUE(i32.ok()) << i32.status();
  EXPECT_EQ(i32->dtype, DType::kI64);
  EXPECT_EQ(i32->shape, (Shape{4}));
  EXPECT_EQ(i32->i64, (std::vector<int64_t>{1, -2, 2147483647, -2147483648LL}));
}

TEST(NpyTest, ParsesHandMadeV1HeaderWithPaddingAndAnyKeyOrder) {
  // Keys reordered, double quotes, no trailing comma, padding spaces and the newline.
  const std::string header = "{\"shape\": (2,), 'fortran_order': False, 'descr': '<i8'}    \n";
  const std::string bytes = NpyV1(header, Bytes(std::vector<int64_t>{7, -3}));
  absl::StatusOr<NpyArray> array = ParseNpy(bytes, "hand.npy");
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->shape, (Shape{2}));
  EXPECT_EQ(array->i64, (std::vector<int64_t>{7, -3}));
}

TEST(NpyTest, ParsesPython2LongSuffixInShape) {
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1L, 2L), }\n";
  absl::StatusOr<NpyArray> array =
      ParseNpy(NpyV1(header, Bytes(std::vector<float>{1, 2})), "old.npy");
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->shape, (Shape{1, 2}));
}

TEST(NpyTest, ZeroSizedArrayHasNoData) {
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }\n";
  absl::StatusOr<NpyArray> array = ParseNpy(NpyV1(header, ""), "empty.npy");
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->shape, (Shape{0, 3}));
  EXPECT_TRUE(array->f32.empty());
}

TEST(NpyTest, RejectsFortranOrderNamingTheFile) {
  absl::StatusOr<NpyArray> array = ReadNpy(TestdataPath("f32_fortran_2x3.npy"));
  ASSERT_FALSE(array.ok());
  EXPECT_NE(array.status().message().find("f32_fortran_2x3.npy: fortran_order is True"),
            std::string::npos)
      << array.status();
}

TEST(NpyTest, RejectsBigEndianNamingTheFile) {
  absl::StatusOr<NpyArray> array = ReadNpy(TestdataPath("f32_big_endian.npy"));
  ASSERT_FALSE(array.ok());
  EXPECT_NE(array.status().message().find("f32_big_endian.npy: dtype '>f4' is big-endian"),
            std::string::npos)
      << array.status();
}

TEST(NpyTest, RejectsFloat64NamingTheDtype) {
  absl::StatusOr<NpyArray> array = ReadNpy(TestdataPath("f64_2x3.npy"));
  ASSERT_FALSE(array.ok());
  EXPECT_NE(array.status().message().find("f64_2x3.npy: unsupported dtype '<f8'"),
            std::string::npos)
      << array.status();
}

TEST(NpyTest, RejectsMalformedFiles) {
  const std::string good_header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  const std::string two_floats = Bytes(std::vector<float>{1, 2});
  ExpectRejected("", "not a .npy file");
  ExpectRejected("PK\x03\x04 this is a zip", "not a .npy file");
  {
    std::string bytes = NpyV1(good_header, two_floats);
    bytes[6] = 4;  // version 4.0
    ExpectRejected(bytes, "unsupported .npy format version 4.0");
  }
  ExpectRejected(NpyV1(good_header, two_floats).substr(0, 30),
                 "truncated: the header length is 58 bytes but only 20 follow");
  ExpectRejected(NpyV1(good_header, two_floats.substr(0, 5)),
                 "truncated: shape (2,) of '<f4' needs 8 bytes of data but only 5 follow");
  ExpectRejected(NpyV1(good_header, two_floats + "xyz"), "3 unexpected bytes after the array");
  ExpectRejected(NpyV1("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }\n", "ab"),
                 "unsupported dtype '|u1'");
  ExpectRejected(
      NpyV1("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }\n", "abcd"),
      "structured dtypes");
  ExpectRejected(NpyV1("{'descr': '<f4', 'shape': (2,), }\n", two_floats),
                 "lacks one of 'descr', 'fortran_order', 'shape'");
  ExpectRejected(
      NpyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}\n", two_floats),
      "unexpected key 'x'");
  ExpectRejected(NpyV1("{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,), }\n", two_floats),
                 "expected True or False");
  ExpectRejected(NpyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }\n", two_floats),
                 "expected a non-negative integer in 'shape'");
  ExpectRejected(NpyV1("'descr': '<f4'\n", two_floats), "the header is not a Python dict");
}

TEST(NpyTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = FreshTempDir() + "/absent.npy";
  absl::StatusOr<NpyArray> array = ReadNpy(path);
  EXPECT_EQ(array.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(array.status().message().find(path), std::string::npos) << array.status();
}

}  // namespace
}  // namespace gpipe
