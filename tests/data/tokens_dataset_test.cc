// TokensDataset and TokenFile: little-endian ids of both widths, next-token windows of the
// training split and the held-out tail, the id range scan past its first piece, and every
// rejection; MappedFile on empty files, directories and missing paths.
#include "runtime/data/tokens_dataset.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/core/mapped_file.h"
#include "runtime/data/open_dataset.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/support/file_fixtures.h"

namespace gpipe {
namespace {

using ::gpipe::testing::FreshTempDir;
using ::gpipe::testing::WriteFile;

DataRequirements LanguageModel(int64_t seq_len, int64_t vocabulary) {
  DataRequirements r;
  r.input_shape = Shape{seq_len};
  r.input_dtype = DType::kI64;
  r.target_shape = Shape{seq_len};
  r.target_dtype = DType::kI64;
  r.num_classes = vocabulary;
  return r;
}

// The ids as the file holds them: little-endian, `width` bytes each, written byte by byte so
// the test does not depend on the host's byte order.
std::string Encode(const std::vector<uint32_t>& ids, int width) {
  std::string bytes;
  for (uint32_t id : ids) {
    for (int b = 0; b < width; ++b) bytes.push_back(static_cast<char>((id >> (8 * b)) & 0xff));
  }
  return bytes;
}

pb::Data TokensData(const std::string& path, pb::TokenDType dtype, double eval_fraction) {
  pb::Data data;
  data.mutable_tokens()->set_path(path);
  data.mutable_tokens()->set_dtype(dtype);
  data.mutable_tokens()->set_eval_fraction(eval_fraction);
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

std::vector<int64_t> Gathered(const Dataset& dataset, const std::vector<int64_t>& indices,
                              bool targets) {
  CpuDevice device;
  Tensor out = *Tensor::Empty(device, dataset.input_shape().WithBatch(indices.size()), DType::kI64,
                              MemoryKind::kData);
  const absl::Status status =
      targets ? dataset.GatherTargets(indices, out) : dataset.GatherInputs(indices, out);
  EXPECT_TRUE(status.ok()) << status;
  return std::vector<int64_t>(out.data<int64_t>(), out.data<int64_t>() + out.num_elements());
}

TEST(TokensDatasetTest, Uint16WindowsAtEveryOffsetWithTargetsShiftedByOne) {
  const std::string dir = FreshTempDir();
  // 20 ids 1000, 1001, ... (two bytes each, high byte non-zero); a quarter held out.
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 20; ++i) ids.push_back(1000 + i * 257);
  WriteFile(dir + "/t.bin", Encode(ids, 2));
  auto dataset = Open(TokensData(dir + "/t.bin", pb::UINT16, 0.25), LanguageModel(4, 65536));
  ASSERT_NE(dataset, nullptr);
  // Training split: the first 15 ids; windows of 4 + 1 at offsets 0..10.
  EXPECT_EQ(dataset->size(), 11);
  EXPECT_EQ(dataset->input_shape(), Shape{4});
  EXPECT_EQ(dataset->target_dtype(), DType::kI64);
  auto id = [&](int64_t i) { return static_cast<int64_t>(ids[i]); };
  EXPECT_EQ(Gathered(*dataset, {0}, false), (std::vector<int64_t>{id(0), id(1), id(2), id(3)}));
  EXPECT_EQ(Gathered(*dataset, {0}, true), (std::vector<int64_t>{id(1), id(2), id(3), id(4)}));
  EXPECT_EQ(Gathered(*dataset, {10, 3}, true),
            (std::vector<int64_t>{id(11), id(12), id(13), id(14), id(4), id(5), id(6), id(7)}));
  // Padding rows are zeros.
  EXPECT_EQ(Gathered(*dataset, {kPaddingSample}, false), (std::vector<int64_t>{0, 0, 0, 0}));
}

TEST(TokensDatasetTest, Uint32IdsAndTheHeldOutTailInNonOverlappingWindows) {
  const std::string dir = FreshTempDir();
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 100; ++i) ids.push_back(70000 + i * 1000003u % 4000000000u);
  WriteFile(dir + "/t.bin", Encode(ids, 4));
  const pb::Data data = TokensData(dir + "/t.bin", pb::UINT32, 0.25);
  EXPECT_TRUE(HasEvalSplit(data));
  auto training = Open(data, LanguageModel(4, int64_t{1} << 32));
  auto eval = Open(data, LanguageModel(4, int64_t{1} << 32), DataSplit::kEval);
  ASSERT_NE(training, nullptr);
  ASSERT_NE(eval, nullptr);
  EXPECT_EQ(training->size(), 71);  // training [0, 75)
  EXPECT_EQ(eval->size(), 6);       // floor((25 - 1) / 4)
  const auto* tokens_eval = dynamic_cast<const TokensDataset*>(eval.get());
  ASSERT_NE(tokens_eval, nullptr);
  for (int64_t j = 0; j < 6; ++j) {
    EXPECT_EQ(tokens_eval->WindowStart(j), 75 + 4 * j);
    const std::vector<int64_t> inputs = Gathered(*eval, {j}, false);
    const std::vector<int64_t> targets = Gathered(*eval, {j}, true);
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(inputs[k], ids[75 + 4 * j + k]);
      EXPECT_EQ(targets[k], ids[75 + 4 * j + k + 1]);
    }
  }
  // The last training target is id 74: no held-out id is a training input or target.
  EXPECT_EQ(Gathered(*training, {70}, true).back(), ids[74]);
}

TEST(TokensDatasetTest, RejectsWhatCannotBeWindows) {
  const std::string dir = FreshTempDir();
  WriteFile(dir + "/odd.bin", std::string(21, '\1'));
  ExpectOpenFails(TokensData(dir + "/odd.bin", pb::UINT16, 0.1), LanguageModel(4, 65536),
                  absl::StatusCode::kInvalidArgument,
                  "data.tokens.path: " + dir +
                      "/odd.bin has 21 bytes, not a whole number of UINT16 ids (2 bytes each)");
  WriteFile(dir + "/six.bin", std::string(12, '\0'));  // 3 UINT32 ids
  ExpectOpenFails(TokensData(dir + "/six.bin", pb::UINT32, 0.0), LanguageModel(4, 10),
                  absl::StatusCode::kInvalidArgument,
                  "data.tokens: the training split has 3 token(s) (the first 1 of 3) but a window "
                  "of seq_len 4 needs 5; give at least 5 tokens");
  WriteFile(dir + "/ten.bin", std::string(20, '\0'));  // 10 UINT16 ids
  ExpectOpenFails(TokensData(dir + "/ten.bin", pb::UINT16, 0.2), LanguageModel(4, 10),
                  absl::StatusCode::kInvalidArgument,
                  "data.tokens: the held-out split has 2 token(s)", DataSplit::kEval);
  ExpectOpenFails(TokensData(dir + "/ten.bin", pb::UINT16, 0.0), LanguageModel(4, 10),
                  absl::StatusCode::kFailedPrecondition, "set data.tokens.eval_fraction in (0, 1)",
                  DataSplit::kEval);
  ExpectOpenFails(TokensData(dir + "/ten.bin", pb::UINT16, 1.0), LanguageModel(4, 10),
                  absl::StatusCode::kInvalidArgument,
                  "data.tokens.eval_fraction must be in [0, 1), got 1");
  ExpectOpenFails(TokensData(dir + "/none.bin", pb::UINT16, 0.1), LanguageModel(4, 10),
                  absl::StatusCode::kNotFound,
                  "data.tokens.path: cannot open " + dir + "/none.bin");
  DataRequirements floats = LanguageModel(4, 10);
  floats.input_dtype = DType::kF32;
  ExpectOpenFails(TokensData(dir + "/ten.bin", pb::UINT16, 0.1), floats,
                  absl::StatusCode::kInvalidArgument,
                  "data.tokens gives int64 token ids (the file's ids) but the model takes f32");
  DataRequirements mse = LanguageModel(4, 0);
  mse.target_dtype = DType::kF32;
  ExpectOpenFails(TokensData(dir + "/ten.bin", pb::UINT16, 0.1), mse,
                  absl::StatusCode::kInvalidArgument,
                  "one score per token id at each position, but the loss expects f32[4] targets");
}

TEST(TokenFileTest, FindsTheFirstIdOutsideTheVocabularyPastTheFirstPiece) {
  const std::string dir = FreshTempDir();
  // 5 Mi ids (more than one 4 Mi-id piece), all below 50000 except two beyond the first piece.
  std::vector<uint32_t> ids(5 << 20);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint32_t>(i % 50000);
  ids[4'500'001] = 50304;
  ids[5'000'000] = 65535;
  WriteFile(dir + "/t.bin", Encode(ids, 2));
  absl::StatusOr<TokenFile> file = TokenFile::Open(dir + "/t.bin", pb::UINT16);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->size(), 5 << 20);
  EXPECT_TRUE(file->CheckIdsBelow(65536, "any").ok());
  const absl::Status status = file->CheckIdsBelow(50304, "the loss scores 50304 classes");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), dir +
                                  "/t.bin: the token at offset 4500001 (byte 9000002) is 50304, "
                                  "outside the model's vocabulary [0, 50304) (the loss scores "
                                  "50304 classes); was the file tokenized for another "
                                  "vocabulary, or is data.tokens.dtype wrong?");
  EXPECT_NE(file->CheckIdsBelow(40000, "x").message().find("offset 40000 (byte 80000) is 40000,"),
            std::string::npos);
  // Reads after the scan released its pages see the same ids.
  int64_t read[2] = {};
  file->Read(4'500'000, 2, read);
  EXPECT_EQ(read[0], 4'500'000 % 50000);
  EXPECT_EQ(read[1], 50304);
}

TEST(MappedFileTest, EmptyFilesDirectoriesAndMissingPaths) {
  const std::string dir = FreshTempDir();
  WriteFile(dir + "/empty", "");
  absl::StatusOr<MappedFile> empty = MappedFile::Open(dir + "/empty");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->bytes().empty());
  EXPECT_EQ(MappedFile::Open(dir).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(MappedFile::Open(dir + "/none").status().code(), absl::StatusCode::kNotFound);
  WriteFile(dir + "/abc", "abc");
  absl::StatusOr<MappedFile> abc = MappedFile::Open(dir + "/abc");
  ASSERT_TRUE(abc.ok());
  MappedFile moved = std::move(*abc);
  ASSERT_EQ(moved.bytes().size(), 3u);
  EXPECT_EQ(static_cast<char>(moved.bytes()[2]), 'c');
  EXPECT_TRUE(abc->bytes().empty());
}

}  // namespace
}  // namespace gpipe
