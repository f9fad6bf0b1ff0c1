// IDX files (plain and gzip) and the IdxDataset over them: values, normalization, both input
// shapes, the held-out split, padding, every rejection, and the real Fashion-MNIST files where
// Debian's dataset-fashion-mnist package is installed.
#include "runtime/data/idx.h"

#include <zlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/data/dataset.h"
#include "runtime/data/idx_dataset.h"
#include "runtime/data/open_dataset.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/support/file_fixtures.h"

namespace gpipe {
namespace {

using ::gpipe::testing::FreshTempDir;
using ::gpipe::testing::ReadFile;
using ::gpipe::testing::WriteFile;

constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// An IDX file: two zero bytes, `type`, the rank, big-endian dims, then `data`.
std::string IdxBytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data,
                     uint8_t type = 0x08) {
  std::string bytes = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>(d >> shift));
  }
  bytes.append(data.begin(), data.end());
  return bytes;
}

void WriteGzip(const std::string& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(file), Z_OK);
}

// Three 2x2 images and their labels.
const std::vector<uint8_t> kPixels = {0, 255, 51, 102, 10, 20, 30, 40, 255, 255, 0, 0};
const std::vector<uint8_t> kLabels = {2, 0, 4};

DataRequirements ImageRequirements(const Shape& input_shape) {
  DataRequirements r;
  r.input_shape = input_shape;
  r.target_shape = Shape{};
  r.target_dtype = DType::kI64;
  r.num_classes = 5;
  return r;
}

struct IdxFiles {
  std::string images;
  std::string labels;
};

// Writes the images and labels (gzip-compressed when `gzip`) into `dir` under `prefix`.
IdxFiles WriteImageFiles(const std::string& dir, const std::string& prefix, bool gzip,
                         const std::vector<uint8_t>& pixels = kPixels,
                         const std::vector<uint8_t>& labels = kLabels) {
  IdxFiles files{dir + "/" + prefix + "-images" + (gzip ? ".gz" : ""),
                 dir + "/" + prefix + "-labels" + (gzip ? ".gz" : "")};
  const std::string images = IdxBytes({static_cast<uint32_t>(pixels.size() / 4), 2, 2}, pixels);
  const std::string label_bytes = IdxBytes({static_cast<uint32_t>(labels.size())}, labels);
  if (gzip) {
    WriteGzip(files.images, images);
    WriteGzip(files.labels, label_bytes);
  } else {
    WriteFile(files.images, images);
    WriteFile(files.labels, label_bytes);
  }
  return files;
}

pb::Data IdxData(const IdxFiles& train, const IdxFiles& test = {}) {
  pb::Data data;
  pb::Idx* idx = data.mutable_idx();
  idx->set_train_images(train.images);
  idx->set_train_labels(train.labels);
  if (!test.images.empty()) idx->set_test_images(test.images);
  if (!test.labels.empty()) idx->set_test_labels(test.labels);
  return data;
}

std::unique_ptr<Dataset> Open(const pb::Data& data, const DataRequirements& r,
                              DataSplit split = DataSplit::kTrain) {
  absl::StatusOr<std::unique_ptr<Dataset>> dataset = OpenDataset(data, r, split);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  return dataset.ok() ? std::move(*dataset) : nullptr;
}

void ExpectOpenFails(const pb::Data& data, const DataRequirements& r, const std::string& fragment,
                     DataSplit split = DataSplit::kTrain) {
  absl::StatusOr<std::unique_ptr<Dataset>> dataset = OpenDataset(data, r, split);
  ASSERT_FALSE(dataset.ok()) << "expected: " << fragment;
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kInvalidArgument) << dataset.status();
  EXPECT_NE(dataset.status().message().find(fragment), std::string::npos) << dataset.status();
}

std::vector<float> Inputs(const Dataset& dataset, const std::vector<int64_t>& indices) {
  CpuDevice device;
  Tensor out = *Tensor::Empty(device, dataset.input_shape().WithBatch(indices.size()), DType::kF32,
                              MemoryKind::kData);
  const absl::Status status = dataset.GatherInputs(indices, out);
  EXPECT_TRUE(status.ok()) << status;
  return std::vector<float>(out.f32(), out.f32() + out.num_elements());
}

std::vector<int64_t> Labels(const Dataset& dataset, const std::vector<int64_t>& indices) {
  CpuDevice device;
  Tensor out = *Tensor::Empty(device, Shape{static_cast<int64_t>(indices.size())}, DType::kI64,
                              MemoryKind::kData);
  const absl::Status status = dataset.GatherTargets(indices, out);
  EXPECT_TRUE(status.ok()) << status;
  return std::vector<int64_t>(out.data<int64_t>(), out.data<int64_t>() + indices.size());
}

void ExpectReadFails(const std::string& path, absl::StatusCode code, const std::string& fragment) {
  absl::StatusOr<IdxArray> array = ReadIdx(path);
  ASSERT_FALSE(array.ok()) << "expected: " << fragment;
  EXPECT_EQ(array.status().code(), code) << array.status();
  EXPECT_NE(array.status().message().find(path), std::string::npos) << array.status();
  EXPECT_NE(array.status().message().find(fragment), std::string::npos) << array.status();
}

TEST(IdxTest, ReadsPlainAndGzipFilesAlike) {
  const std::string dir = FreshTempDir();
  const std::string bytes = IdxBytes({3, 2, 2}, kPixels);
  WriteFile(dir + "/plain", bytes);
  WriteGzip(dir + "/packed.gz", bytes);
  ASSERT_NE(ReadFile(dir + "/packed.gz"), bytes);  // really compressed
  for (const std::string name : {"plain", "packed.gz"}) {
    absl::StatusOr<IdxArray> array = ReadIdx(dir + "/" + name);
    ASSERT_TRUE(array.ok()) << name << ": " << array.status();
    EXPECT_EQ(array->dims, (std::vector<int64_t>{3, 2, 2})) << name;
    EXPECT_EQ(array->data, kPixels) << name;
  }
}

TEST(IdxTest, ReadsLargeDimensionsBigEndian) {
  // 0x0102 = 258 rows of one byte: the dimension is big-endian, and reading spans chunks.
  const std::vector<uint8_t> data(258, 7);
  absl::StatusOr<IdxArray> array = ParseIdx(IdxBytes({258, 1}, data), "x");
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->dims, (std::vector<int64_t>{258, 1}));
  EXPECT_EQ(array->data, data);
}

TEST(IdxTest, MissingFileIsNotFound) {
  const std::string path = FreshTempDir() + "/none.gz";
  ExpectReadFails(path, absl::StatusCode::kNotFound, "cannot open " + path + ": No such file");
}

TEST(IdxTest, RejectsBadMagicNamingTheBytes) {
  const std::string path = FreshTempDir() + "/x";
  WriteFile(path, "\x01\x02\x08\x01" + std::string(4, '\0'));
  ExpectReadFails(path, absl::StatusCode::kInvalidArgument,
                  "not an IDX file: it starts with 0x01 0x02 but an IDX file starts with two "
                  "zero bytes");
}

TEST(IdxTest, RejectsElementTypesOtherThanUnsignedBytes) {
  const std::string path = FreshTempDir() + "/floats";
  WriteFile(path, IdxBytes({1}, {0, 0, 128, 63}, 0x0D));
  ExpectReadFails(path, absl::StatusCode::kInvalidArgument,
                  "IDX element type 0x0D (float32) is not supported; only unsigned bytes (type "
                  "0x08) are");
}

TEST(IdxTest, RejectsTruncatedFilesSayingExpectedAndPresentBytes) {
  const std::string dir = FreshTempDir();
  const std::string bytes = IdxBytes({3, 2, 2}, kPixels);
  WriteFile(dir + "/short", bytes.substr(0, bytes.size() - 7));
  ExpectReadFails(dir + "/short", absl::StatusCode::kInvalidArgument,
                  "truncated: dimensions [3, 2, 2] need 12 bytes of data but only 5 follow the "
                  "header");
  WriteFile(dir + "/header", bytes.substr(0, 9));
  ExpectReadFails(dir + "/header", absl::StatusCode::kInvalidArgument,
                  "truncated: the header declares 3 dimension(s), which need 16 header bytes, "
                  "but the file has only 9");
  WriteFile(dir + "/tiny", std::string(2, '\0'));
  ExpectReadFails(dir + "/tiny", absl::StatusCode::kInvalidArgument,
                  "truncated: an IDX header needs at least 4 bytes but the file has 2");
}

TEST(IdxTest, RejectsAGzipStreamCutShort) {
  const std::string dir = FreshTempDir();
  // Incompressible data, so cutting the compressed file cuts the data too.
  std::vector<uint8_t> noise(4000);
  uint32_t state = 1;
  for (uint8_t& byte : noise)
    byte = static_cast<uint8_t>((state = state * 1664525 + 1013904223) >> 24);
  WriteGzip(dir + "/full.gz", IdxBytes({1000, 2, 2}, noise));
  const std::string packed = ReadFile(dir + "/full.gz");
  WriteFile(dir + "/cut.gz", packed.substr(0, packed.size() / 2));
  absl::StatusOr<IdxArray> array = ReadIdx(dir + "/cut.gz");
  ASSERT_FALSE(array.ok());
  EXPECT_NE(array.status().message().find(dir + "/cut.gz: truncated: dimensions [1000, 2, 2] "
                                                "need 4000 bytes of data but only "),
            std::string::npos)
      << array.status();
  EXPECT_NE(array.status().message().find("(the gzip stream ends early)"), std::string::npos)
      << array.status();
  // Only the 8-byte trailer (CRC and length) missing: the data is whole but the file is not.
  WriteFile(dir + "/no_trailer.gz", packed.substr(0, packed.size() - 8));
  ExpectReadFails(dir + "/no_trailer.gz", absl::StatusCode::kInvalidArgument,
                  "the gzip stream ends early");
}

TEST(IdxTest, RejectsBytesAfterTheData) {
  const std::string path = FreshTempDir() + "/long";
  WriteFile(path, IdxBytes({3, 2, 2}, kPixels) + "xyz");
  ExpectReadFails(path, absl::StatusCode::kInvalidArgument,
                  "3 unexpected bytes after the data (dimensions [3, 2, 2] need 12 bytes)");
}

TEST(IdxTest, RejectsZeroDimensions) {
  const std::string path = FreshTempDir() + "/scalar";
  WriteFile(path, IdxBytes({}, {}));
  ExpectReadFails(path, absl::StatusCode::kInvalidArgument, "declares 0 dimensions");
}

TEST(IdxDatasetTest, PixelsAreScaledAndNormalizedForBothInputShapes) {
  const std::string dir = FreshTempDir();
  for (const bool gzip : {false, true}) {
    pb::Data data = IdxData(WriteImageFiles(dir, gzip ? "gz" : "plain", gzip));
    data.mutable_idx()->set_mean(0.5);
    data.mutable_idx()->set_std(0.25);
    for (const Shape& shape : {Shape{1, 2, 2}, Shape{4}}) {
      auto dataset = Open(data, ImageRequirements(shape));
      ASSERT_NE(dataset, nullptr);
      EXPECT_EQ(dataset->size(), 3);
      EXPECT_EQ(dataset->input_shape(), shape);
      EXPECT_EQ(dataset->input_dtype(), DType::kF32);
      EXPECT_EQ(dataset->target_shape(), Shape{});
      EXPECT_EQ(dataset->target_dtype(), DType::kI64);
      const std::vector<float> inputs = Inputs(*dataset, {2, 0});
      std::vector<float> expected;
      for (const int64_t sample : {2, 0}) {
        for (int k = 0; k < 4; ++k) {
          expected.push_back(static_cast<float>((kPixels[sample * 4 + k] / 255.0 - 0.5) / 0.25));
        }
      }
      EXPECT_EQ(inputs, expected);
      EXPECT_EQ(inputs[0], 2.0f);   // pixel 255: (1 - 0.5) / 0.25
      EXPECT_EQ(inputs[4], -2.0f);  // pixel 0
      EXPECT_EQ(Labels(*dataset, {2, 0, 1}), (std::vector<int64_t>{4, 2, 0}));
    }
  }
}

TEST(IdxDatasetTest, DefaultNormalizationIsPixelOver255) {
  pb::Data data = IdxData(WriteImageFiles(FreshTempDir(), "x", false));
  auto dataset = Open(data, ImageRequirements(Shape{4}));
  ASSERT_NE(dataset, nullptr);
  EXPECT_EQ(Inputs(*dataset, {0}), (std::vector<float>{0.0f, 1.0f, 0.2f, 0.4f}));
}

TEST(IdxDatasetTest, EvalSplitReadsTheTestFiles) {
  const std::string dir = FreshTempDir();
  const IdxFiles train = WriteImageFiles(dir, "train", true);
  const IdxFiles test = WriteImageFiles(dir, "test", true, {1, 2, 3, 4, 5, 6, 7, 8}, {3, 1});
  const pb::Data data = IdxData(train, test);
  EXPECT_TRUE(HasEvalSplit(data));
  auto eval = Open(data, ImageRequirements(Shape{4}), DataSplit::kEval);
  ASSERT_NE(eval, nullptr);
  EXPECT_EQ(eval->size(), 2);
  EXPECT_EQ(Labels(*eval, {0, 1}), (std::vector<int64_t>{3, 1}));
  EXPECT_FLOAT_EQ(Inputs(*eval, {1})[3], 8.0f / 255.0f);
  auto training = Open(data, ImageRequirements(Shape{4}), DataSplit::kTrain);
  ASSERT_NE(training, nullptr);
  EXPECT_EQ(training->size(), 3);
}

TEST(IdxDatasetTest, EvalSplitNeedsBothTestFiles) {
  const std::string dir = FreshTempDir();
  const IdxFiles train = WriteImageFiles(dir, "train", false);
  const pb::Data without = IdxData(train);
  EXPECT_FALSE(HasEvalSplit(without));
  absl::StatusOr<std::unique_ptr<Dataset>> eval =
      OpenDataset(without, ImageRequirements(Shape{4}), DataSplit::kEval);
  ASSERT_FALSE(eval.ok());
  EXPECT_EQ(eval.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(eval.status().message().find("set data.idx.test_images and data.idx.test_labels"),
            std::string::npos)
      << eval.status();
  pb::Data half = without;
  half.mutable_idx()->set_test_images(train.images);
  ExpectOpenFails(half, ImageRequirements(Shape{4}),
                  "data.idx.test_labels is required (an IDX file of uint8 labels [N]) (give both "
                  "test files or neither)",
                  DataSplit::kEval);
}

TEST(IdxDatasetTest, InputShapeMustBeChannelImageOrFlat) {
  const std::string dir = FreshTempDir();
  const IdxFiles files = WriteImageFiles(dir, "x", false);
  ExpectOpenFails(IdxData(files), ImageRequirements(Shape{2, 2}),
                  files.images +
                      ": images are 2x2 (dimensions [3, 2, 2]) but model.input.shape is [2, 2]; "
                      "set it to [1, 2, 2] or [4]");
  ExpectOpenFails(IdxData(files), ImageRequirements(Shape{5}),
                  "but model.input.shape is [5]; set it to [1, 2, 2] or [4]");
}

TEST(IdxDatasetTest, ImageAndLabelCountsMustAgree) {
  const std::string dir = FreshTempDir();
  const IdxFiles files = WriteImageFiles(dir, "x", false, kPixels, {1, 2});
  ExpectOpenFails(IdxData(files), ImageRequirements(Shape{4}),
                  files.labels + ": 2 labels but " + files.images +
                      " has 3 images; both files need the same number of samples");
}

TEST(IdxDatasetTest, LabelOutsideTheClassesNamesSampleAndLabel) {
  const std::string dir = FreshTempDir();
  const IdxFiles files = WriteImageFiles(dir, "x", false, kPixels, {1, 7, 2});
  ExpectOpenFails(IdxData(files), ImageRequirements(Shape{4}),
                  files.labels +
                      ": label 7 of sample 1 is outside [0, 5) (the model has 5 "
                      "classes)");
}

TEST(IdxDatasetTest, RegressionLossIsRejected) {
  DataRequirements mse = ImageRequirements(Shape{4});
  mse.num_classes = 0;
  mse.target_dtype = DType::kF32;
  mse.target_shape = Shape{10};
  ExpectOpenFails(IdxData(WriteImageFiles(FreshTempDir(), "x", false)), mse,
                  "data.idx: the labels are class ids, so idx needs the softmax_cross_entropy "
                  "loss, but the loss expects f32[10] targets");
}

TEST(IdxDatasetTest, TokenIdInputsAreRejected) {
  DataRequirements ids = ImageRequirements(Shape{4});
  ids.input_dtype = DType::kI64;
  ExpectOpenFails(IdxData(WriteImageFiles(FreshTempDir(), "x", false)), ids,
                  "data.idx gives float32 images but the model takes i64 inputs");
}

TEST(IdxDatasetTest, SwappedFilesAndBadFilesNameTheFieldOrFile) {
  const std::string dir = FreshTempDir();
  const IdxFiles files = WriteImageFiles(dir, "x", false);
  ExpectOpenFails(IdxData({files.labels, files.images}), ImageRequirements(Shape{4}),
                  files.labels +
                      ": images have dimensions [3] but an IDX image file is [N, "
                      "rows, cols]");
  ExpectOpenFails(IdxData({files.images, files.images}), ImageRequirements(Shape{4}),
                  files.images +
                      ": labels have dimensions [3, 2, 2] but an IDX label file is "
                      "[N]");
  WriteFile(dir + "/bad", "\x01\x02\x08\x01");
  ExpectOpenFails(IdxData({dir + "/bad", files.labels}), ImageRequirements(Shape{4}),
                  "data.idx.train_images: " + dir + "/bad: not an IDX file");
  absl::StatusOr<std::unique_ptr<Dataset>> missing =
      OpenDataset(IdxData({files.images, dir + "/none"}), ImageRequirements(Shape{4}));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("data.idx.train_labels: cannot open " + dir + "/none"),
            std::string::npos)
      << missing.status();
  ExpectOpenFails(IdxData({"", files.labels}), ImageRequirements(Shape{4}),
                  "data.idx.train_images is required");
  pb::Data zero_std = IdxData(files);
  zero_std.mutable_idx()->set_std(0);
  ExpectOpenFails(zero_std, ImageRequirements(Shape{4}),
                  "data.idx.std must be a finite number > 0");
}

TEST(IdxDatasetTest, PaddingSamplesAreZeros) {
  pb::Data data = IdxData(WriteImageFiles(FreshTempDir(), "x", false));
  data.mutable_idx()->set_mean(0.5);
  auto dataset = Open(data, ImageRequirements(Shape{1, 2, 2}));
  ASSERT_NE(dataset, nullptr);
  const std::vector<float> inputs = Inputs(*dataset, {1, kPaddingSample});
  EXPECT_EQ(std::vector<float>(inputs.begin() + 4, inputs.end()), std::vector<float>(4, 0.0f));
  EXPECT_NE(inputs[0], 0.0f);
  EXPECT_EQ(Labels(*dataset, {kPaddingSample, 2}), (std::vector<int64_t>{0, 4}));
  CpuDevice device;
  Tensor out = *Tensor::Empty(device, Shape{1}, DType::kI64, MemoryKind::kData);
  for (const int64_t bad : {int64_t{-2}, int64_t{3}}) {
    const absl::Status status = dataset->GatherTargets(std::vector<int64_t>{bad}, out);
    EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << bad;
  }
}

TEST(IdxDatasetTest, ReleasedSideIsFailedPrecondition) {
  DataRequirements last_stage = ImageRequirements(Shape{4});
  last_stage.keep_inputs = false;
  auto dataset = Open(IdxData(WriteImageFiles(FreshTempDir(), "x", false)), last_stage);
  ASSERT_NE(dataset, nullptr);
  EXPECT_EQ(Labels(*dataset, {0}), std::vector<int64_t>{2});
  CpuDevice device;
  Tensor out = *Tensor::Empty(device, Shape{1, 4}, DType::kF32, MemoryKind::kData);
  EXPECT_EQ(dataset->GatherInputs(std::vector<int64_t>{0}, out).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(IdxDatasetTest, FashionMnistFromDebianHasBalancedClasses) {
  const std::string dir = kFashionMnistDir;
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed at " << dir
                 << " (Debian package dataset-fashion-mnist)";
  }
  pb::Data data;
  pb::Idx* idx = data.mutable_idx();
  idx->set_train_images(dir + "/train-images-idx3-ubyte.gz");
  idx->set_train_labels(dir + "/train-labels-idx1-ubyte.gz");
  idx->set_test_images(dir + "/t10k-images-idx3-ubyte.gz");
  idx->set_test_labels(dir + "/t10k-labels-idx1-ubyte.gz");
  DataRequirements r = ImageRequirements(Shape{1, 28, 28});
  r.num_classes = 10;
  for (const auto& [split, size] : {std::pair{DataSplit::kTrain, int64_t{60000}},
                                    std::pair{DataSplit::kEval, int64_t{10000}}}) {
    auto dataset = Open(data, r, split);
    ASSERT_NE(dataset, nullptr);
    ASSERT_EQ(dataset->size(), size);
    std::vector<int64_t> all(size);
    for (int64_t i = 0; i < size; ++i) all[i] = i;
    std::vector<int64_t> counts(10, 0);
    for (int64_t label : Labels(*dataset, all)) {
      ASSERT_GE(label, 0);
      ASSERT_LT(label, 10);
      ++counts[label];
    }
    EXPECT_EQ(counts, std::vector<int64_t>(10, size / 10));
    // Pixels scaled to [0, 1], not all dark.
    const std::vector<float> first = Inputs(*dataset, {0});
    ASSERT_EQ(first.size(), 28u * 28u);
    float brightest = 0;
    for (float v : first) {
      EXPECT_GE(v, 0.0f);
      EXPECT_LE(v, 1.0f);
      brightest = std::max(brightest, v);
    }
    EXPECT_GT(brightest, 0.5f);
  }
  absl::StatusOr<IdxArray> images = ReadIdx(dir + "/t10k-images-idx3-ubyte.gz");
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ(images->dims, (std::vector<int64_t>{10000, 28, 28}));
}

}  // namespace
}  // namespace gpipe
