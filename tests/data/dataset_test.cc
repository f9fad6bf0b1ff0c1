// OpenDataset (synthetic and .npy sources, every check at open; held-out splits and padding
// across sources) and BatchSampler.
#include "runtime/data/dataset.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/data/batch_sampler.h"
#include "runtime/data/npy.h"
#include "runtime/data/open_dataset.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/support/file_fixtures.h"

namespace gpipe {
namespace {

using ::gpipe::testing::FreshTempDir;

DataRequirements ClassificationRequirements() {
  DataRequirements r;
  r.input_shape = Shape{2, 3};
  r.target_shape = Shape{};
  r.target_dtype = DType::kI64;
  r.num_classes = 4;
  r.seed = 1;
  return r;
}

DataRequirements RegressionRequirements() {
  DataRequirements r;
  r.input_shape = Shape{3};
  r.target_shape = Shape{2};
  r.target_dtype = DType::kF32;
  return r;
}

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

pb::Data NpyData(const std::string& inputs, const std::string& targets) {
  pb::Data data;
  data.mutable_npy()->set_inputs(inputs);
  data.mutable_npy()->set_targets(targets);
  return data;
}

// Writes inputs [n, 2, 3] (values 0, 1, 2, ...) and class targets, returns the Data spec.
pb::Data WriteClassificationFiles(const std::string& dir, std::vector<int64_t> classes) {
  const int64_t n = classes.size();
  EXPECT_TRUE(WriteNpy(dir + "/x.npy", Shape{n, 2, 3}, Iota(n * 6)).ok());
  EXPECT_TRUE(WriteNpy(dir + "/y.npy", Shape{n}, classes).ok());
  return NpyData(dir + "/x.npy", dir + "/y.npy");
}

void ExpectOpenFails(const pb::Data& data, const DataRequirements& r, const std::string& fragment,
                     DataSplit split = DataSplit::kTrain) {
  absl::StatusOr<std::unique_ptr<Dataset>> dataset = OpenDataset(data, r, split);
  ASSERT_FALSE(dataset.ok()) << "expected: " << fragment;
  EXPECT_NE(dataset.status().message().find(fragment), std::string::npos) << dataset.status();
}

TEST(OpenDatasetTest, SyntheticSourceHasTheRequestedShapes) {
  pb::Data data;
  data.mutable_synthetic()->set_num_samples(123);
  absl::StatusOr<std::unique_ptr<Dataset>> dataset =
      OpenDataset(data, ClassificationRequirements());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ((*dataset)->size(), 123);
  EXPECT_EQ((*dataset)->input_shape(), (Shape{2, 3}));
  EXPECT_EQ((*dataset)->input_dtype(), DType::kF32);
  EXPECT_EQ((*dataset)->target_shape(), Shape{});
  EXPECT_EQ((*dataset)->target_dtype(), DType::kI64);
}

TEST(OpenDatasetTest, NoSourceIsAnError) {
  ExpectOpenFails(pb::Data(), ClassificationRequirements(), "data has no source");
}

TEST(OpenDatasetTest, NpyClassificationGathersRowsInIndexOrder) {
  CpuDevice device;
  const pb::Data data = WriteClassificationFiles(FreshTempDir(), {3, 0, 2, 1, 1});
  absl::StatusOr<std::unique_ptr<Dataset>> dataset =
      OpenDataset(data, ClassificationRequirements());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ((*dataset)->size(), 5);
  Tensor inputs = *Tensor::Empty(device, Shape{2, 2, 3}, DType::kF32, MemoryKind::kData);
  Tensor targets = *Tensor::Empty(device, Shape{2}, DType::kI64, MemoryKind::kData);
  const std::vector<int64_t> indices = {4, 1};
  ASSERT_TRUE((*dataset)->GatherInputs(indices, inputs).ok());
  ASSERT_TRUE((*dataset)->GatherTargets(indices, targets).ok());
  std::vector<float> expected_inputs = Iota(30);
  expected_inputs = {expected_inputs.begin() + 24, expected_inputs.end()};
  for (int k = 0; k < 6; ++k) expected_inputs.push_back(6.0f + k);
  EXPECT_EQ(std::vector<float>(inputs.f32(), inputs.f32() + 12), expected_inputs);
  EXPECT_EQ(targets.data<int64_t>()[0], 1);
  EXPECT_EQ(targets.data<int64_t>()[1], 0);
  absl::Status status = (*dataset)->GatherTargets(std::vector<int64_t>{5, 0}, targets);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(status.message().find("y.npy"), std::string::npos) << status;
}

TEST(OpenDatasetTest, NpyRegressionGathersFloatTargets) {
  CpuDevice device;
  const std::string dir = FreshTempDir();
  ASSERT_TRUE(WriteNpy(dir + "/x.npy", Shape{4, 3}, Iota(12)).ok());
  ASSERT_TRUE(WriteNpy(dir + "/y.npy", Shape{4, 2}, Iota(8)).ok());
  auto dataset = OpenDataset(NpyData(dir + "/x.npy", dir + "/y.npy"), RegressionRequirements());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  Tensor targets = *Tensor::Empty(device, Shape{1, 2}, DType::kF32, MemoryKind::kData);
  ASSERT_TRUE((*dataset)->GatherTargets(std::vector<int64_t>{3}, targets).ok());
  EXPECT_EQ(targets.f32()[0], 6.0f);
  EXPECT_EQ(targets.f32()[1], 7.0f);
}

TEST(OpenDatasetTest, NpyKeepsOnlyTheRequestedSideButValidatesBoth) {
  const std::string dir = FreshTempDir();
  ASSERT_TRUE(WriteNpy(dir + "/x.npy", Shape{4, 3}, Iota(12)).ok());
  ASSERT_TRUE(WriteNpy(dir + "/y.npy", Shape{4, 2}, Iota(8)).ok());
  CpuDevice device;
  Tensor inputs = *Tensor::Empty(device, Shape{1, 3}, DType::kF32, MemoryKind::kData);
  Tensor targets = *Tensor::Empty(device, Shape{1, 2}, DType::kF32, MemoryKind::kData);
  const std::vector<int64_t> index = {2};

  DataRequirements first_stage = RegressionRequirements();
  first_stage.keep_targets = false;
  auto inputs_only = OpenDataset(NpyData(dir + "/x.npy", dir + "/y.npy"), first_stage);
  ASSERT_TRUE(inputs_only.ok()) << inputs_only.status();
  EXPECT_TRUE((*inputs_only)->GatherInputs(index, inputs).ok());
  EXPECT_EQ(inputs.f32()[0], 6.0f);
  EXPECT_EQ((*inputs_only)->GatherTargets(index, targets).code(),
            absl::StatusCode::kFailedPrecondition);

  DataRequirements last_stage = RegressionRequirements();
  last_stage.keep_inputs = false;
  auto targets_only = OpenDataset(NpyData(dir + "/x.npy", dir + "/y.npy"), last_stage);
  ASSERT_TRUE(targets_only.ok()) << targets_only.status();
  EXPECT_TRUE((*targets_only)->GatherTargets(index, targets).ok());
  EXPECT_EQ(targets.f32()[1], 5.0f);
  EXPECT_EQ((*targets_only)->GatherInputs(index, inputs).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*targets_only)->size(), 4);

  // The side that is dropped is still validated: wrong target shape fails the first stage too.
  ASSERT_TRUE(WriteNpy(dir + "/y.npy", Shape{4, 5}, Iota(20)).ok());
  ExpectOpenFails(NpyData(dir + "/x.npy", dir + "/y.npy"), first_stage, "y.npy");
}

TEST(OpenDatasetTest, NpyInputsWithWrongShapeNameFileAndShapes) {
  const std::string dir = FreshTempDir();
  ASSERT_TRUE(WriteNpy(dir + "/x.npy", Shape{5, 6}, Iota(30)).ok());
  ASSERT_TRUE(WriteNpy(dir + "/y.npy", Shape{5}, std::vector<int64_t>(5, 0)).ok());
  ExpectOpenFails(NpyData(dir + "/x.npy", dir + "/y.npy"), ClassificationRequirements(),
                  dir +
                      "/x.npy: inputs have shape [5, 6] but the model needs [N, 2, 3] "
                      "(N samples of [2, 3])");
}

TEST(OpenDatasetTest, NpyTargetsWithWrongShapeOrDtypeAreRejected) {
  const std::string dir = FreshTempDir();
  ASSERT_TRUE(WriteNpy(dir + "/x.npy", Shape{5, 2, 3}, Iota(30)).ok());
  ASSERT_TRUE(WriteNpy(dir + "/y2d.npy", Shape{5, 1}, std::vector<int64_t>(5, 0)).ok());
  ExpectOpenFails(NpyData(dir + "/x.npy", dir + "/y2d.npy"), ClassificationRequirements(),
                  dir + "/y2d.npy: targets have shape [5, 1] but the model needs [N]");
  ASSERT_TRUE(WriteNpy(dir + "/yf.npy", Shape{5}, Iota(5)).ok());
  ExpectOpenFails(NpyData(dir + "/x.npy", dir + "/yf.npy"), ClassificationRequirements(),
                  dir + "/yf.npy: targets must be int64 class ids");
  ExpectOpenFails(NpyData(dir + "/y2d.npy", dir + "/yf.npy"), ClassificationRequirements(),
                  dir + "/y2d.npy: inputs must be float32");
}

TEST(OpenDatasetTest, NpySampleCountsMustAgree) {
  const std::string dir = FreshTempDir();
  ASSERT_TRUE(WriteNpy(dir + "/x.npy", Shape{5, 2, 3}, Iota(30)).ok());
  ASSERT_TRUE(WriteNpy(dir + "/y.npy", Shape{4}, std::vector<int64_t>(4, 0)).ok());
  ExpectOpenFails(
      NpyData(dir + "/x.npy", dir + "/y.npy"), ClassificationRequirements(),
      dir + "/y.npy: 4 targets (shape [4]) but " + dir + "/x.npy has 5 inputs (shape [5, 2, 3])");
}

TEST(OpenDatasetTest, NpyClassIdsOutOfRangeAreRejectedAtOpen) {
  const std::string dir = FreshTempDir();
  ExpectOpenFails(WriteClassificationFiles(dir, {0, 1, 4}), ClassificationRequirements(),
                  dir + "/y.npy: class id 4 of sample 2 is outside [0, 4)");
  ExpectOpenFails(WriteClassificationFiles(dir, {-1, 1}), ClassificationRequirements(),
                  "class id -1 of sample 0");
}

TEST(OpenDatasetTest, NpyMissingFilesAndFieldsAreNamed) {
  const std::string dir = FreshTempDir();
  ExpectOpenFails(NpyData(dir + "/none.npy", dir + "/y.npy"), ClassificationRequirements(),
                  "data.npy.inputs: cannot open " + dir + "/none.npy: No such file");
  ASSERT_TRUE(WriteNpy(dir + "/x.npy", Shape{1, 2, 3}, Iota(6)).ok());
  ExpectOpenFails(NpyData(dir + "/x.npy", dir + "/none.npy"), ClassificationRequirements(),
                  "data.npy.targets: cannot open " + dir + "/none.npy: No such file");
  ExpectOpenFails(NpyData("", dir + "/y.npy"), ClassificationRequirements(),
                  "data.npy.inputs is required");
  ExpectOpenFails(NpyData(dir + "/x.npy", ""), ClassificationRequirements(),
                  "data.npy.targets is required");
}

TEST(OpenDatasetTest, NpyEmptyDataSetIsRejected) {
  const std::string dir = FreshTempDir();
  ExpectOpenFails(WriteClassificationFiles(dir, {}), ClassificationRequirements(),
                  "the data set is empty");
}

TEST(OpenDatasetTest, NpyEvalSplitReadsTheEvalFilesWithTheSameChecks) {
  CpuDevice device;
  const std::string dir = FreshTempDir();
  pb::Data data = WriteClassificationFiles(dir, {3, 0, 2, 1, 1});
  EXPECT_FALSE(HasEvalSplit(data));
  ASSERT_TRUE(WriteNpy(dir + "/ex.npy", Shape{2, 2, 3}, Iota(12)).ok());
  ASSERT_TRUE(WriteNpy(dir + "/ey.npy", Shape{2}, std::vector<int64_t>{1, 3}).ok());
  data.mutable_npy()->set_eval_inputs(dir + "/ex.npy");
  data.mutable_npy()->set_eval_targets(dir + "/ey.npy");
  EXPECT_TRUE(HasEvalSplit(data));
  auto eval = OpenDataset(data, ClassificationRequirements(), DataSplit::kEval);
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_EQ((*eval)->size(), 2);
  Tensor targets = *Tensor::Empty(device, Shape{2}, DType::kI64, MemoryKind::kData);
  ASSERT_TRUE((*eval)->GatherTargets(std::vector<int64_t>{1, 0}, targets).ok());
  EXPECT_EQ(targets.data<int64_t>()[0], 3);
  EXPECT_EQ(targets.data<int64_t>()[1], 1);
  auto training = OpenDataset(data, ClassificationRequirements(), DataSplit::kTrain);
  ASSERT_TRUE(training.ok()) << training.status();
  EXPECT_EQ((*training)->size(), 5);

  // The eval files are checked like the training files, and named.
  ASSERT_TRUE(WriteNpy(dir + "/ey.npy", Shape{2}, std::vector<int64_t>{1, 4}).ok());
  ExpectOpenFails(data, ClassificationRequirements(),
                  dir + "/ey.npy: class id 4 of sample 1 is outside [0, 4)", DataSplit::kEval);
  ASSERT_TRUE(WriteNpy(dir + "/ex.npy", Shape{2, 6}, Iota(12)).ok());
  ExpectOpenFails(data, ClassificationRequirements(),
                  dir + "/ex.npy: inputs have shape [2, 6] but the model needs [N, 2, 3]",
                  DataSplit::kEval);
  data.mutable_npy()->set_eval_inputs(dir + "/none.npy");
  ExpectOpenFails(data, ClassificationRequirements(),
                  "data.npy.eval_inputs: cannot open " + dir + "/none.npy", DataSplit::kEval);
}

TEST(OpenDatasetTest, NpyEvalFilesComeInPairs) {
  const std::string dir = FreshTempDir();
  pb::Data data = WriteClassificationFiles(dir, {0, 1});
  data.mutable_npy()->set_eval_targets(dir + "/y.npy");
  EXPECT_TRUE(HasEvalSplit(data));
  ExpectOpenFails(data, ClassificationRequirements(),
                  "data.npy.eval_inputs is required (a float32 .npy file) (give both eval files "
                  "or neither)",
                  DataSplit::kEval);
}

TEST(OpenDatasetTest, EvalSplitOfASourceWithoutOneNamesTheFieldToSet) {
  const std::string dir = FreshTempDir();
  pb::Data synthetic;
  synthetic.mutable_synthetic();
  pb::Data text;
  text.mutable_text()->add_paths(dir + "/corpus.txt");
  text.mutable_text()->set_eval_fraction(0);
  pb::Data idx;
  idx.mutable_idx()->set_train_images(dir + "/images");
  idx.mutable_idx()->set_train_labels(dir + "/labels");
  const std::vector<std::pair<pb::Data, std::string>> cases = {
      {synthetic, "set data.synthetic.eval_samples"},
      {WriteClassificationFiles(dir, {0, 1}), "set data.npy.eval_inputs and data.npy.eval_targets"},
      {idx, "set data.idx.test_images and data.idx.test_labels"},
      {text, "set data.text.eval_fraction in (0, 1)"},
  };
  for (const auto& [data, fragment] : cases) {
    EXPECT_FALSE(HasEvalSplit(data)) << data.ShortDebugString();
    absl::StatusOr<std::unique_ptr<Dataset>> dataset =
        OpenDataset(data, ClassificationRequirements(), DataSplit::kEval);
    ASSERT_FALSE(dataset.ok()) << data.ShortDebugString();
    EXPECT_EQ(dataset.status().code(), absl::StatusCode::kFailedPrecondition) << dataset.status();
    EXPECT_NE(dataset.status().message().find(fragment), std::string::npos) << dataset.status();
  }
  EXPECT_FALSE(HasEvalSplit(pb::Data()));
}

TEST(OpenDatasetTest, NpyPaddingSamplesAreZeros) {
  CpuDevice device;
  const pb::Data data = WriteClassificationFiles(FreshTempDir(), {3, 2, 1});
  auto dataset = OpenDataset(data, ClassificationRequirements());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  Tensor inputs = *Tensor::Empty(device, Shape{2, 2, 3}, DType::kF32, MemoryKind::kData);
  Tensor targets = *Tensor::Empty(device, Shape{3}, DType::kI64, MemoryKind::kData);
  ASSERT_TRUE((*dataset)->GatherInputs(std::vector<int64_t>{kPaddingSample, 1}, inputs).ok());
  EXPECT_EQ(std::vector<float>(inputs.f32(), inputs.f32() + 6), std::vector<float>(6, 0.0f));
  EXPECT_EQ(inputs.f32()[6], 6.0f);
  ASSERT_TRUE((*dataset)
                  ->GatherTargets(std::vector<int64_t>{0, kPaddingSample, kPaddingSample}, targets)
                  .ok());
  EXPECT_EQ(std::vector<int64_t>(targets.data<int64_t>(), targets.data<int64_t>() + 3),
            (std::vector<int64_t>{3, 0, 0}));
  EXPECT_EQ((*dataset)->GatherTargets(std::vector<int64_t>{0, -2, 1}, targets).code(),
            absl::StatusCode::kOutOfRange);
}

TEST(OpenDatasetTest, NpyRejectsTokenIdInputs) {
  DataRequirements ids = ClassificationRequirements();
  ids.input_dtype = DType::kI64;
  ExpectOpenFails(WriteClassificationFiles(FreshTempDir(), {0, 1}), ids,
                  "data.npy gives float32 inputs but the model takes i64 inputs");
}

TEST(BatchSamplerTest, WithoutShuffleStepsWalkTheDataInOrderModuloN) {
  BatchSampler sampler(/*dataset_size=*/10, /*global_batch=*/4, /*shuffle=*/false, 7);
  EXPECT_EQ(sampler.IndicesForStep(0), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(sampler.IndicesForStep(1), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(sampler.IndicesForStep(2), (std::vector<int64_t>{8, 9, 0, 1}));
  EXPECT_EQ(sampler.IndicesForStep(3), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(sampler.IndicesForStep(1000), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(BatchSamplerTest, BatchLargerThanDataSetWrapsSeveralTimes) {
  BatchSampler sampler(3, 7, false, 0);
  EXPECT_EQ(sampler.IndicesForStep(1), (std::vector<int64_t>{1, 2, 0, 1, 2, 0, 1}));
}

TEST(BatchSamplerTest, ShuffledEpochIsAPermutationAndEpochsDiffer) {
  constexpr int64_t kN = 100;
  BatchSampler sampler(kN, 10, true, 42);
  std::vector<int64_t> epoch0, epoch1;
  for (int64_t step = 0; step < 10; ++step) {
    const std::vector<int64_t> batch = sampler.IndicesForStep(step);
    epoch0.insert(epoch0.end(), batch.begin(), batch.end());
  }
  for (int64_t step = 10; step < 20; ++step) {
    const std::vector<int64_t> batch = sampler.IndicesForStep(step);
    epoch1.insert(epoch1.end(), batch.begin(), batch.end());
  }
  std::vector<int64_t> identity(kN);
  std::iota(identity.begin(), identity.end(), 0);
  std::vector<int64_t> sorted0 = epoch0, sorted1 = epoch1;
  std::sort(sorted0.begin(), sorted0.end());
  std::sort(sorted1.begin(), sorted1.end());
  EXPECT_EQ(sorted0, identity);
  EXPECT_EQ(sorted1, identity);
  EXPECT_NE(epoch0, identity);
  EXPECT_NE(epoch0, epoch1);
  EXPECT_EQ(epoch0, sampler.EpochPermutation(0));
  EXPECT_EQ(epoch1, sampler.EpochPermutation(1));
}

TEST(BatchSamplerTest, ShuffledBatchCrossesEpochBoundary) {
  // N = 10, B = 4: step 2 takes positions 8, 9 of epoch 0 and 0, 1 of epoch 1.
  BatchSampler sampler(10, 4, true, 3);
  const std::vector<int64_t> e0 = sampler.EpochPermutation(0);
  const std::vector<int64_t> e1 = sampler.EpochPermutation(1);
  EXPECT_EQ(sampler.IndicesForStep(2), (std::vector<int64_t>{e0[8], e0[9], e1[0], e1[1]}));
  // Steps 0..4 cover epochs 0 and 1 exactly (20 positions).
  std::vector<int64_t> visited;
  for (int64_t step = 0; step < 5; ++step) {
    const std::vector<int64_t> batch = sampler.IndicesForStep(step);
    visited.insert(visited.end(), batch.begin(), batch.end());
  }
  std::vector<int64_t> expected = e0;
  expected.insert(expected.end(), e1.begin(), e1.end());
  EXPECT_EQ(visited, expected);
}

TEST(BatchSamplerTest, ShuffleIsDeterministicAndDependsOnSeed) {
  BatchSampler a(50, 8, true, 9), b(50, 8, true, 9), c(50, 8, true, 10);
  // Query a out of order: the cache must not change the answer.
  const std::vector<int64_t> a13 = a.IndicesForStep(13);
  const std::vector<int64_t> a2 = a.IndicesForStep(2);
  EXPECT_EQ(a2, b.IndicesForStep(2));
  EXPECT_EQ(a13, b.IndicesForStep(13));
  EXPECT_EQ(a.IndicesForStep(2), a2);
  EXPECT_NE(a.EpochPermutation(0), c.EpochPermutation(0));
  // A copy computes the same indices.
  BatchSampler copy = a;
  EXPECT_EQ(copy.IndicesForStep(13), a13);
}

TEST(BatchSamplerTest, ShuffleMatchesAcrossConcurrentCallers) {
  const BatchSampler sampler(97, 5, true, 1);
  std::vector<std::vector<int64_t>> expected;
  for (int64_t step = 0; step < 60; ++step) expected.push_back(sampler.IndicesForStep(step));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t step = 59 - t; step >= 0; --step) {
        mismatches[t] += sampler.IndicesForStep(step) != expected[step];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(BatchSamplerTest, WithoutShuffleEpochPermutationIsIdentity) {
  BatchSampler sampler(4, 2, false, 5);
  EXPECT_EQ(sampler.EpochPermutation(3), (std::vector<int64_t>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace gpipe
