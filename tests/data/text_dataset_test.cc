// TextDataset: byte windows of the concatenated files, targets shifted by one byte, the held-out
// tail in non-overlapping windows, padding, and every rejection.
#include "runtime/data/text_dataset.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/data/open_dataset.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/support/file_fixtures.h"

namespace gpipe {
namespace {

using ::gpipe::testing::FreshTempDir;
using ::gpipe::testing::WriteFile;

DataRequirements LanguageModel(int64_t seq_len, int64_t vocabulary = 256) {
  DataRequirements r;
  r.input_shape = Shape{seq_len};
  r.input_dtype = DType::kI64;
  r.target_shape = Shape{seq_len};
  r.target_dtype = DType::kI64;
  r.num_classes = vocabulary;
  return r;
}

pb::Data TextData(const std::vector<std::string>& paths, double eval_fraction) {
  pb::Data data;
  for (const std::string& path : paths) data.mutable_text()->add_paths(path);
  data.mutable_text()->set_eval_fraction(eval_fraction);
  return data;
}

std::unique_ptr<Dataset> Open(const pb::Data& data, const DataRequirements& r,
                              DataSplit split = DataSplit::kTrain) {
  absl::StatusOr<std::unique_ptr<Dataset>> dataset = OpenDataset(data, r, split);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  return dataset.ok() ? std::move(*dataset) : nullptr;
}

void ExpectOpenFails(const pb::Data& data, const DataRequirements& r, absl::StatusCode code,
                     const std::string& fragment, DataSplit split = DataSplit::kTrain) {
  absl::StatusOr<std::unique_ptr<Dataset>> dataset = OpenDataset(data, r, split);
  ASSERT_FALSE(dataset.ok()) << "expected: " << fragment;
  EXPECT_EQ(dataset.status().code(), code) << dataset.status();
  EXPECT_NE(dataset.status().message().find(fragment), std::string::npos) << dataset.status();
}

// Gathers the inputs or targets of `indices` as one string of bytes (padding as '\0').
std::string Gathered(const Dataset& dataset, const std::vector<int64_t>& indices, bool targets) {
  CpuDevice device;
  Tensor out = *Tensor::Empty(device, dataset.input_shape().WithBatch(indices.size()), DType::kI64,
                              MemoryKind::kData);
  const absl::Status status =
      targets ? dataset.GatherTargets(indices, out) : dataset.GatherInputs(indices, out);
  EXPECT_TRUE(status.ok()) << status;
  std::string bytes;
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    EXPECT_GE(out.data<int64_t>()[i], 0);
    EXPECT_LT(out.data<int64_t>()[i], 256);
    bytes.push_back(static_cast<char>(out.data<int64_t>()[i]));
  }
  return bytes;
}

// "abcdefghij" + "KLMNOPQRST": 20 bytes; eval_fraction 0.25 holds out the last 5.
pb::Data TwoFiles(const std::string& dir) {
  WriteFile(dir + "/a.txt", "abcdefghij");
  WriteFile(dir + "/b.txt", "KLMNOPQRST");
  return TextData({dir + "/a.txt", dir + "/b.txt"}, 0.25);
}

TEST(TextDatasetTest, TrainingSamplesAreWindowsAtEveryOffsetWithTargetsShiftedByOne) {
  auto dataset = Open(TwoFiles(FreshTempDir()), LanguageModel(4));
  ASSERT_NE(dataset, nullptr);
  // Training split: the first 15 bytes "abcdefghijKLMNO"; windows of 4 + 1 at offsets 0..10.
  EXPECT_EQ(dataset->size(), 11);
  EXPECT_EQ(dataset->input_shape(), Shape{4});
  EXPECT_EQ(dataset->input_dtype(), DType::kI64);
  EXPECT_EQ(dataset->target_shape(), Shape{4});
  EXPECT_EQ(dataset->target_dtype(), DType::kI64);
  EXPECT_EQ(Gathered(*dataset, {0}, false), "abcd");
  EXPECT_EQ(Gathered(*dataset, {0}, true), "bcde");
  // Windows cross the boundary between files; the last stays inside the training split.
  EXPECT_EQ(Gathered(*dataset, {8, 10}, false), "ijKLKLMN");
  EXPECT_EQ(Gathered(*dataset, {8, 10}, true), "jKLMLMNO");
}

TEST(TextDatasetTest, EvalSamplesAreNonOverlappingWindowsOfTheTail) {
  const std::string dir = FreshTempDir();
  auto small = Open(TwoFiles(dir), LanguageModel(4), DataSplit::kEval);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->size(), 1);  // floor((5 - 1) / 4)
  EXPECT_EQ(Gathered(*small, {0}, false), "PQRS");
  EXPECT_EQ(Gathered(*small, {0}, true), "QRST");

  std::string text;
  for (int i = 0; i < 100; ++i) text.push_back(static_cast<char>(i));
  WriteFile(dir + "/bytes", text);
  // 100 bytes, a quarter held out: training [0, 75), evaluation [75, 100).
  const pb::Data data = TextData({dir + "/bytes"}, 0.25);
  auto training = Open(data, LanguageModel(4));
  auto eval = Open(data, LanguageModel(4), DataSplit::kEval);
  ASSERT_NE(training, nullptr);
  ASSERT_NE(eval, nullptr);
  EXPECT_EQ(training->size(), 71);
  EXPECT_EQ(eval->size(), 6);  // floor((25 - 1) / 4)
  const auto* text_eval = dynamic_cast<const TextDataset*>(eval.get());
  ASSERT_NE(text_eval, nullptr);
  for (int64_t j = 0; j < 6; ++j) {
    EXPECT_EQ(text_eval->WindowStart(j), 75 + 4 * j);
    const std::string inputs = Gathered(*eval, {j}, false);
    const std::string targets = Gathered(*eval, {j}, true);
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(inputs[k], static_cast<char>(75 + 4 * j + k));
      EXPECT_EQ(targets[k], static_cast<char>(75 + 4 * j + k + 1));
    }
  }
  // The last training target is byte 74; no held-out byte is a training input or target.
  EXPECT_EQ(Gathered(*training, {70}, true).back(), static_cast<char>(74));
}

TEST(TextDatasetTest, ZeroEvalFractionTrainsOnEverythingAndHasNoEvalSplit) {
  const std::string dir = FreshTempDir();
  WriteFile(dir + "/a.txt", "0123456789");
  const pb::Data data = TextData({dir + "/a.txt"}, 0.0);
  EXPECT_FALSE(HasEvalSplit(data));
  EXPECT_TRUE(HasEvalSplit(TextData({dir + "/a.txt"}, 0.5)));
  auto dataset = Open(data, LanguageModel(3));
  ASSERT_NE(dataset, nullptr);
  EXPECT_EQ(dataset->size(), 7);
  EXPECT_EQ(Gathered(*dataset, {6}, true), "789");
  ExpectOpenFails(data, LanguageModel(3), absl::StatusCode::kFailedPrecondition,
                  "set data.text.eval_fraction in (0, 1)", DataSplit::kEval);
}

TEST(TextDatasetTest, PaddingSamplesAreZerosAndOtherIndicesAreOutOfRange) {
  auto dataset = Open(TwoFiles(FreshTempDir()), LanguageModel(4));
  ASSERT_NE(dataset, nullptr);
  EXPECT_EQ(Gathered(*dataset, {1, kPaddingSample}, false),
            std::string("bcde") + std::string(4, '\0'));
  EXPECT_EQ(Gathered(*dataset, {kPaddingSample}, true), std::string(4, '\0'));
  CpuDevice device;
  Tensor out = *Tensor::Empty(device, Shape{1, 4}, DType::kI64, MemoryKind::kData);
  for (const int64_t bad : {int64_t{-2}, int64_t{11}}) {
    const absl::Status status = dataset->GatherInputs(std::vector<int64_t>{bad}, out);
    EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << bad;
    EXPECT_NE(status.message().find("text data (training split)"), std::string::npos) << status;
  }
}

TEST(TextDatasetTest, TooLittleTextSaysHowManyBytesAreNeeded) {
  const std::string dir = FreshTempDir();
  WriteFile(dir + "/a.txt", "abcdefgh");
  // Training split floor(0.5 * 8) = 4 bytes; seq_len 4 needs 5, so 10 bytes in all.
  ExpectOpenFails(TextData({dir + "/a.txt"}, 0.5), LanguageModel(4),
                  absl::StatusCode::kInvalidArgument,
                  "data.text: the training split has 4 byte(s) (the first 0.5 of 8) but a window "
                  "of seq_len 4 needs 5; give at least 10 bytes of text");
  // 8 bytes, eval_fraction 0.25: training 6 bytes, held-out 2, but one held-out window needs 5.
  ExpectOpenFails(TextData({dir + "/a.txt"}, 0.25), LanguageModel(4),
                  absl::StatusCode::kInvalidArgument,
                  "data.text: the held-out split has 2 byte(s) (the last 0.25 of 8) but a window "
                  "of seq_len 4 needs 5; raise data.text.eval_fraction or give more text",
                  DataSplit::kEval);
}

TEST(TextDatasetTest, BytesAboveTheVocabularyNameFileOffsetAndValue) {
  const std::string dir = FreshTempDir();
  WriteFile(dir + "/a.txt", "plain ascii");
  WriteFile(dir + "/b.txt", "ab\xC8xyz");
  ExpectOpenFails(TextData({dir + "/a.txt", dir + "/b.txt"}, 0.0), LanguageModel(2, 128),
                  absl::StatusCode::kInvalidArgument,
                  dir +
                      "/b.txt: the byte at offset 2 is 200 but the model has only 128 classes; "
                      "byte-level text needs a vocabulary of 256");
  // With 256 classes every byte is a token.
  auto dataset = Open(TextData({dir + "/b.txt"}, 0.0), LanguageModel(2));
  ASSERT_NE(dataset, nullptr);
  EXPECT_EQ(Gathered(*dataset, {1}, false), "b\xC8");
}

TEST(TextDatasetTest, RequirementsMustBeTokenIdWindows) {
  const std::string dir = FreshTempDir();
  const pb::Data data = TwoFiles(dir);
  DataRequirements floats = LanguageModel(4);
  floats.input_dtype = DType::kF32;
  ExpectOpenFails(data, floats, absl::StatusCode::kInvalidArgument,
                  "data.text gives int64 token ids (the bytes) but the model takes f32 inputs; set "
                  "model.input.type: INT64");
  DataRequirements image = LanguageModel(4);
  image.input_shape = Shape{2, 2};
  ExpectOpenFails(data, image, absl::StatusCode::kInvalidArgument,
                  "model.input.shape must be [seq_len], got [2, 2]");
  DataRequirements one_class_per_window = LanguageModel(4);
  one_class_per_window.target_shape = Shape{};
  ExpectOpenFails(data, one_class_per_window, absl::StatusCode::kInvalidArgument,
                  "the loss must be softmax_cross_entropy over one score per byte value at each "
                  "position, but the loss expects i64[] targets");
  DataRequirements mse = LanguageModel(4);
  mse.num_classes = 0;
  mse.target_dtype = DType::kF32;
  ExpectOpenFails(data, mse, absl::StatusCode::kInvalidArgument, "expects f32[4] targets");
}

TEST(TextDatasetTest, BadSpecsNameTheField) {
  const std::string dir = FreshTempDir();
  WriteFile(dir + "/a.txt", "0123456789");
  ExpectOpenFails(TextData({}, 0.1), LanguageModel(2), absl::StatusCode::kInvalidArgument,
                  "data.text.paths is empty; list at least one text file");
  ExpectOpenFails(TextData({dir + "/a.txt"}, 1.0), LanguageModel(2),
                  absl::StatusCode::kInvalidArgument,
                  "data.text.eval_fraction must be in [0, 1), got 1");
  ExpectOpenFails(TextData({dir + "/a.txt", dir + "/none.txt"}, 0.1), LanguageModel(2),
                  absl::StatusCode::kNotFound,
                  "data.text.paths[1]: cannot open " + dir + "/none.txt");
}

}  // namespace
}  // namespace gpipe
