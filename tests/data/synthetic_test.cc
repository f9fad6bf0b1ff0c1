// SyntheticDataset: determinism, per-sample independence, learnable structure, the held-out
// split, padding, errors.
#include "runtime/data/synthetic.h"

#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/data/open_dataset.h"
#include "runtime/device/cpu/cpu_device.h"

namespace gpipe {
namespace {

DataRequirements Classification(int64_t features, int64_t classes, uint64_t seed) {
  DataRequirements r;
  r.input_shape = Shape{features};
  r.target_shape = Shape{};
  r.target_dtype = DType::kI64;
  r.num_classes = classes;
  r.seed = seed;
  return r;
}

DataRequirements Regression(const Shape& input, const Shape& target, uint64_t seed) {
  DataRequirements r;
  r.input_shape = input;
  r.target_shape = target;
  r.target_dtype = DType::kF32;
  r.seed = seed;
  return r;
}

pb::Synthetic Spec(int64_t samples, double noise) {
  pb::Synthetic spec;
  spec.set_num_samples(samples);
  spec.set_noise(noise);
  return spec;
}

std::unique_ptr<SyntheticDataset> Make(const pb::Synthetic& spec, const DataRequirements& r) {
  absl::StatusOr<std::unique_ptr<SyntheticDataset>> dataset = SyntheticDataset::Create(spec, r);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  return dataset.ok() ? std::move(*dataset) : nullptr;
}

std::vector<float> Inputs(CpuDevice& device, const Dataset& dataset,
                          const std::vector<int64_t>& indices) {
  Tensor out = *Tensor::Empty(device, dataset.input_shape().WithBatch(indices.size()), DType::kF32,
                              MemoryKind::kData);
  EXPECT_TRUE(dataset.GatherInputs(indices, out).ok());
  return std::vector<float>(out.f32(), out.f32() + out.num_elements());
}

std::vector<float> FloatTargets(CpuDevice& device, const Dataset& dataset,
                                const std::vector<int64_t>& indices) {
  Tensor out = *Tensor::Empty(device, dataset.target_shape().WithBatch(indices.size()), DType::kF32,
                              MemoryKind::kData);
  EXPECT_TRUE(dataset.GatherTargets(indices, out).ok());
  return std::vector<float>(out.f32(), out.f32() + out.num_elements());
}

// atanh(y) = w . x + b, fitted exactly through the first 5 samples of a regression on 4 inputs
// and 1 target (x row-major [5, 4]) by Gaussian elimination with partial pivoting.
class AtanhLinearFit {
 public:
  AtanhLinearFit(const std::vector<float>& x, const std::vector<float>& y) {
    // The 5x5 system [x_i, 1] * [w; b] = atanh(y_i), augmented.
    for (int i = 0; i < 5; ++i) {
      for (int f = 0; f < 4; ++f) a_[i][f] = x[i * 4 + f];
      a_[i][4] = 1.0;
      a_[i][5] = std::atanh(static_cast<double>(y[i]));
    }
    for (int col = 0; col < 5; ++col) {
      int pivot = col;
      for (int row = col + 1; row < 5; ++row) {
        if (std::fabs(a_[row][col]) > std::fabs(a_[pivot][col])) pivot = row;
      }
      std::swap(a_[col], a_[pivot]);
      for (int row = 0; row < 5; ++row) {
        if (row == col) continue;
        const double factor = a_[row][col] / a_[col][col];
        for (int k = col; k < 6; ++k) a_[row][k] -= factor * a_[col][k];
      }
    }
  }

  // tanh(w . x + b) for the sample at `x` (its 4 inputs).
  double Predict(const float* x) const {
    double prediction = a_[4][5] / a_[4][4];
    for (int f = 0; f < 4; ++f) prediction += a_[f][5] / a_[f][f] * x[f];
    return std::tanh(prediction);
  }

 private:
  double a_[5][6];
};

std::vector<int64_t> ClassTargets(CpuDevice& device, const Dataset& dataset,
                                  const std::vector<int64_t>& indices) {
  Tensor out = *Tensor::Empty(device, Shape{static_cast<int64_t>(indices.size())}, DType::kI64,
                              MemoryKind::kData);
  EXPECT_TRUE(dataset.GatherTargets(indices, out).ok());
  return std::vector<int64_t>(out.data<int64_t>(), out.data<int64_t>() + indices.size());
}

TEST(SyntheticDatasetTest, SameSeedGivesSameSamplesAndOtherSeedDiffers) {
  CpuDevice device;
  auto a = Make(Spec(100, 0.5), Classification(8, 4, 42));
  auto b = Make(Spec(100, 0.5), Classification(8, 4, 42));
  auto c = Make(Spec(100, 0.5), Classification(8, 4, 43));
  const std::vector<int64_t> indices = {0, 17, 99, 3};
  EXPECT_EQ(Inputs(device, *a, indices), Inputs(device, *b, indices));
  EXPECT_EQ(ClassTargets(device, *a, indices), ClassTargets(device, *b, indices));
  EXPECT_NE(Inputs(device, *a, indices), Inputs(device, *c, indices));
}

TEST(SyntheticDatasetTest, SampleDoesNotDependOnBatchComposition) {
  CpuDevice device;
  for (const DataRequirements& r :
       {Classification(5, 3, 7), Regression(Shape{2, 3}, Shape{4}, 7)}) {
    auto dataset = Make(Spec(50, 0.3), r);
    const int64_t features = dataset->input_shape().num_elements();
    const std::vector<float> alone = Inputs(device, *dataset, {31});
    const std::vector<float> in_batch = Inputs(device, *dataset, {2, 31, 31, 49});
    ASSERT_EQ(in_batch.size(), static_cast<size_t>(4 * features));
    EXPECT_EQ(std::vector<float>(in_batch.begin() + features, in_batch.begin() + 2 * features),
              alone);
    EXPECT_EQ(std::vector<float>(in_batch.begin() + 2 * features, in_batch.begin() + 3 * features),
              alone);
    if (dataset->is_classification()) {
      EXPECT_EQ(ClassTargets(device, *dataset, {2, 31, 49})[1],
                ClassTargets(device, *dataset, {31})[0]);
    } else {
      const std::vector<float> target = FloatTargets(device, *dataset, {31});
      const std::vector<float> targets = FloatTargets(device, *dataset, {49, 31});
      EXPECT_EQ(std::vector<float>(targets.begin() + 4, targets.end()), target);
    }
  }
}

TEST(SyntheticDatasetTest, DifferentSamplesDiffer) {
  CpuDevice device;
  auto dataset = Make(Spec(10, 0.5), Classification(6, 2, 1));
  const std::vector<float> inputs = Inputs(device, *dataset, {0, 1});
  EXPECT_NE(std::vector<float>(inputs.begin(), inputs.begin() + 6),
            std::vector<float>(inputs.begin() + 6, inputs.end()));
}

TEST(SyntheticDatasetTest, ClassesAreBalancedAndSeparatedByTheirCenters) {
  CpuDevice device;
  constexpr int64_t kFeatures = 16, kClasses = 4, kSamples = 2000;
  auto dataset = Make(Spec(kSamples, 0.5), Classification(kFeatures, kClasses, 5));
  std::vector<int64_t> all(kSamples);
  std::iota(all.begin(), all.end(), 0);
  const std::vector<float> inputs = Inputs(device, *dataset, all);
  const std::vector<int64_t> classes = ClassTargets(device, *dataset, all);

  std::vector<int64_t> counts(kClasses, 0);
  std::vector<std::vector<double>> means(kClasses, std::vector<double>(kFeatures, 0.0));
  int64_t nearest_center_correct = 0;
  for (int64_t i = 0; i < kSamples; ++i) {
    ASSERT_GE(classes[i], 0);
    ASSERT_LT(classes[i], kClasses);
    EXPECT_EQ(classes[i], dataset->ClassOf(i));
    ++counts[classes[i]];
    for (int64_t f = 0; f < kFeatures; ++f) means[classes[i]][f] += inputs[i * kFeatures + f];
    // The nearest class center predicts the label (the data is learnable).
    int64_t best = -1;
    double best_distance = 1e300;
    for (int64_t c = 0; c < kClasses; ++c) {
      const std::vector<float> center = dataset->ClassCenter(c);
      double d = 0;
      for (int64_t f = 0; f < kFeatures; ++f) {
        d += std::pow(inputs[i * kFeatures + f] - center[f], 2);
      }
      if (d < best_distance) best_distance = d, best = c;
    }
    nearest_center_correct += best == classes[i];
  }
  EXPECT_GT(nearest_center_correct, kSamples * 99 / 100);
  for (int64_t c = 0; c < kClasses; ++c) {
    // Roughly kSamples / kClasses each (binomial sd ~ 19).
    EXPECT_GT(counts[c], 400) << c;
    EXPECT_LT(counts[c], 600) << c;
    // Each class mean is its center, within a few standard errors (0.5 / sqrt(500)).
    const std::vector<float> center = dataset->ClassCenter(c);
    for (int64_t f = 0; f < kFeatures; ++f) {
      EXPECT_NEAR(means[c][f] / counts[c], center[f], 0.12) << "class " << c << " feature " << f;
    }
  }
  // Centers are N(0, 1) per feature: two centers are far apart compared with the noise.
  double distance = 0;
  const std::vector<float> c0 = dataset->ClassCenter(0), c1 = dataset->ClassCenter(1);
  for (int64_t f = 0; f < kFeatures; ++f) distance += std::pow(c0[f] - c1[f], 2);
  EXPECT_GT(std::sqrt(distance), 2.0);
}

TEST(SyntheticDatasetTest, ZeroNoisePutsEverySampleOnItsCenter) {
  CpuDevice device;
  auto dataset = Make(Spec(20, 0.0), Classification(3, 5, 9));
  const std::vector<float> inputs = Inputs(device, *dataset, {4, 11});
  const std::vector<int64_t> classes = ClassTargets(device, *dataset, {4, 11});
  for (int i = 0; i < 2; ++i) {
    const std::vector<float> center = dataset->ClassCenter(classes[i]);
    EXPECT_EQ(std::vector<float>(inputs.begin() + 3 * i, inputs.begin() + 3 * i + 3), center);
  }
}

TEST(SyntheticDatasetTest, RegressionTargetsFollowAFixedTeacher) {
  CpuDevice device;
  const DataRequirements r = Regression(Shape{6}, Shape{2}, 3);
  auto noiseless = Make(Spec(300, 0.0), r);
  auto noisy = Make(Spec(300, 0.1), r);
  std::vector<int64_t> all(300);
  std::iota(all.begin(), all.end(), 0);
  const std::vector<float> x = Inputs(device, *noiseless, all);
  const std::vector<float> y = FloatTargets(device, *noiseless, all);
  const std::vector<float> y_noisy = FloatTargets(device, *noisy, all);
  // Inputs are N(0, 1) and do not depend on the noise level.
  EXPECT_EQ(x, Inputs(device, *noisy, all));
  double mean = 0, square = 0;
  for (float v : x) mean += v, square += v * v;
  mean /= x.size();
  square /= x.size();
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(square, 1.0, 0.15);
  // Noiseless targets are tanh outputs: inside (-1, 1), not constant.
  float lo = 1, hi = -1;
  for (float v : y) {
    EXPECT_GT(v, -1.0f);
    EXPECT_LT(v, 1.0f);
    lo = std::min(lo, v), hi = std::max(hi, v);
  }
  EXPECT_GT(hi - lo, 0.5f);
  // Noise adds a zero-mean perturbation of the requested size to the teacher's output.
  double diff_mean = 0, diff_square = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double d = y_noisy[i] - y[i];
    diff_mean += d, diff_square += d * d;
  }
  diff_mean /= y.size();
  diff_square /= y.size();
  EXPECT_NEAR(diff_mean, 0.0, 0.02);
  EXPECT_NEAR(std::sqrt(diff_square), 0.1, 0.02);
}

TEST(SyntheticDatasetTest, RegressionTargetsAreLearnableByLeastSquaresOnAtanh) {
  // atanh(y) = W x + b exactly when noise is 0: a least-squares fit of one target on 4 inputs
  // from 5 samples predicts a 6th sample.
  CpuDevice device;
  auto dataset = Make(Spec(6, 0.0), Regression(Shape{4}, Shape{1}, 11));
  std::vector<int64_t> all = {0, 1, 2, 3, 4, 5};
  const std::vector<float> x = Inputs(device, *dataset, all);
  const std::vector<float> y = FloatTargets(device, *dataset, all);
  const AtanhLinearFit fit(x, y);
  EXPECT_NEAR(fit.Predict(&x[5 * 4]), y[5], 1e-4);
}

TEST(SyntheticDatasetTest, IndexOutsideTheDataSetIsOutOfRange) {
  CpuDevice device;
  auto dataset = Make(Spec(10, 0.5), Classification(2, 2, 0));
  Tensor inputs = *Tensor::Empty(device, Shape{2, 2}, DType::kF32, MemoryKind::kData);
  absl::Status status = dataset->GatherInputs(std::vector<int64_t>{3, 10}, inputs);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(status.message().find("sample index 10 (position 1) is outside [0, 10)"),
            std::string::npos)
      << status;
  Tensor targets = *Tensor::Empty(device, Shape{1}, DType::kI64, MemoryKind::kData);
  status = dataset->GatherTargets(std::vector<int64_t>{-2}, targets);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(status.message().find("sample index -2 (position 0) is outside [0, 10) and is not "
                                  "the padding index -1"),
            std::string::npos)
      << status;
}

TEST(SyntheticDatasetTest, PaddingSamplesAreZeros) {
  CpuDevice device;
  for (const DataRequirements& r : {Classification(3, 4, 2), Regression(Shape{3}, Shape{2}, 2)}) {
    auto dataset = Make(Spec(10, 0.5), r);
    const std::vector<float> inputs = Inputs(device, *dataset, {4, kPaddingSample, 4});
    EXPECT_EQ(std::vector<float>(inputs.begin() + 3, inputs.begin() + 6),
              std::vector<float>(3, 0.0f));
    EXPECT_EQ(std::vector<float>(inputs.begin(), inputs.begin() + 3),
              std::vector<float>(inputs.begin() + 6, inputs.end()));
    if (dataset->is_classification()) {
      EXPECT_EQ(ClassTargets(device, *dataset, {kPaddingSample, 4}),
                (std::vector<int64_t>{0, dataset->ClassOf(4)}));
    } else {
      const std::vector<float> targets = FloatTargets(device, *dataset, {kPaddingSample});
      EXPECT_EQ(targets, std::vector<float>(2, 0.0f));
    }
  }
}

pb::Synthetic SpecWithEval(int64_t samples, int64_t eval_samples, double noise) {
  pb::Synthetic spec = Spec(samples, noise);
  spec.set_eval_samples(eval_samples);
  return spec;
}

std::unique_ptr<SyntheticDataset> MakeEval(const pb::Synthetic& spec, const DataRequirements& r) {
  absl::StatusOr<std::unique_ptr<SyntheticDataset>> dataset =
      SyntheticDataset::Create(spec, r, DataSplit::kEval);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  return dataset.ok() ? std::move(*dataset) : nullptr;
}

TEST(SyntheticDatasetTest, EvalSplitSharesTheCentersButDrawsOtherSamples) {
  CpuDevice device;
  constexpr int64_t kFeatures = 8, kClasses = 4, kEval = 400;
  const DataRequirements r = Classification(kFeatures, kClasses, 21);
  auto training = Make(SpecWithEval(1000, kEval, 0.5), r);
  auto eval = MakeEval(SpecWithEval(1000, kEval, 0.5), r);
  ASSERT_NE(eval, nullptr);
  EXPECT_EQ(training->size(), 1000);
  EXPECT_EQ(eval->size(), kEval);
  // The held-out split does not change the training samples.
  auto without_eval = Make(Spec(1000, 0.5), r);
  EXPECT_EQ(Inputs(device, *training, {0, 5, 999}), Inputs(device, *without_eval, {0, 5, 999}));
  std::vector<int64_t> all(kEval);
  std::iota(all.begin(), all.end(), 0);
  const std::vector<float> eval_inputs = Inputs(device, *eval, all);
  const std::vector<int64_t> eval_classes = ClassTargets(device, *eval, all);
  EXPECT_NE(std::vector<float>(eval_inputs.begin(), eval_inputs.begin() + 10 * kFeatures),
            Inputs(device, *training, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  int64_t same_class = 0, nearest_center_correct = 0;
  std::vector<int64_t> counts(kClasses, 0);
  for (int64_t i = 0; i < kEval; ++i) {
    same_class += eval_classes[i] == training->ClassOf(i);
    ++counts[eval_classes[i]];
    int64_t best = -1;
    double best_distance = 1e300;
    for (int64_t c = 0; c < kClasses; ++c) {
      EXPECT_EQ(eval->ClassCenter(c), training->ClassCenter(c));
      double d = 0;
      const std::vector<float> center = training->ClassCenter(c);
      for (int64_t f = 0; f < kFeatures; ++f) {
        d += std::pow(eval_inputs[i * kFeatures + f] - center[f], 2);
      }
      if (d < best_distance) best_distance = d, best = c;
    }
    nearest_center_correct += best == eval_classes[i];
  }
  // The training classes' centers classify the held-out samples: same distribution.
  EXPECT_GT(nearest_center_correct, kEval * 97 / 100);
  // Labels are independent draws: about a quarter agree with the training label of the index.
  EXPECT_GT(same_class, kEval / 8);
  EXPECT_LT(same_class, kEval / 2);
  for (int64_t c = 0; c < kClasses; ++c) EXPECT_GT(counts[c], kEval / 8) << c;
  // Deterministic.
  auto again = MakeEval(SpecWithEval(1000, kEval, 0.5), r);
  EXPECT_EQ(Inputs(device, *again, {7, 399}), Inputs(device, *eval, {7, 399}));
}

TEST(SyntheticDatasetTest, EvalSplitRegressionFollowsTheTrainingTeacher) {
  // Fit atanh(y) = W x + b on 5 noiseless training samples; it predicts held-out samples.
  CpuDevice device;
  const DataRequirements r = Regression(Shape{4}, Shape{1}, 11);
  auto training = Make(SpecWithEval(5, 3, 0.0), r);
  auto eval = MakeEval(SpecWithEval(5, 3, 0.0), r);
  ASSERT_NE(eval, nullptr);
  const std::vector<int64_t> all = {0, 1, 2, 3, 4};
  const std::vector<float> x = Inputs(device, *training, all);
  const std::vector<float> y = FloatTargets(device, *training, all);
  const AtanhLinearFit fit(x, y);
  const std::vector<float> eval_x = Inputs(device, *eval, {0, 1, 2});
  const std::vector<float> eval_y = FloatTargets(device, *eval, {0, 1, 2});
  EXPECT_NE(std::vector<float>(eval_x.begin(), eval_x.begin() + 4),
            std::vector<float>(x.begin(), x.begin() + 4));
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(fit.Predict(&eval_x[j * 4]), eval_y[j], 1e-4) << j;
  }
}

TEST(SyntheticDatasetTest, EvalSplitNeedsEvalSamples) {
  absl::StatusOr<std::unique_ptr<SyntheticDataset>> d =
      SyntheticDataset::Create(Spec(10, 0.5), Classification(2, 2, 0), DataSplit::kEval);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("data.synthetic.eval_samples is 0"), std::string::npos)
      << d.status();
  d = SyntheticDataset::Create(SpecWithEval(10, -1, 0.5), Classification(2, 2, 0));
  EXPECT_NE(d.status().message().find("data.synthetic.eval_samples must be >= 0, got -1"),
            std::string::npos)
      << d.status();
  pb::Data data;
  *data.mutable_synthetic() = Spec(10, 0.5);
  EXPECT_FALSE(HasEvalSplit(data));
  data.mutable_synthetic()->set_eval_samples(3);
  EXPECT_TRUE(HasEvalSplit(data));
  absl::StatusOr<std::unique_ptr<Dataset>> opened =
      OpenDataset(data, Classification(2, 2, 0), DataSplit::kEval);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->size(), 3);
}

TEST(SyntheticDatasetTest, TokenIdInputsAreRejected) {
  DataRequirements ids = Classification(2, 2, 0);
  ids.input_dtype = DType::kI64;
  absl::StatusOr<std::unique_ptr<SyntheticDataset>> d =
      SyntheticDataset::Create(Spec(10, 0.5), ids);
  EXPECT_NE(d.status().message().find("data.synthetic makes f32 inputs but the model takes i64"),
            std::string::npos)
      << d.status();
}

TEST(SyntheticDatasetTest, WrongOutputTensorIsRejected) {
  CpuDevice device;
  auto dataset = Make(Spec(10, 0.5), Classification(2, 2, 0));
  Tensor wrong_shape = *Tensor::Empty(device, Shape{3, 2}, DType::kF32, MemoryKind::kData);
  absl::Status status = dataset->GatherInputs(std::vector<int64_t>{0, 1}, wrong_shape);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("output tensor is f32[3, 2] but 2 samples need f32[2, 2]"),
            std::string::npos)
      << status;
  Tensor wrong_dtype = *Tensor::Empty(device, Shape{2}, DType::kF32, MemoryKind::kData);
  status = dataset->GatherTargets(std::vector<int64_t>{0, 1}, wrong_dtype);
  EXPECT_NE(status.message().find("need i64[2]"), std::string::npos) << status;
}

TEST(SyntheticDatasetTest, RejectsBadSpecNamingTheField) {
  absl::StatusOr<std::unique_ptr<SyntheticDataset>> d =
      SyntheticDataset::Create(Spec(0, 0.5), Classification(2, 2, 0));
  EXPECT_NE(d.status().message().find("data.synthetic.num_samples must be >= 1, got 0"),
            std::string::npos)
      << d.status();
  d = SyntheticDataset::Create(Spec(10, -0.5), Classification(2, 2, 0));
  EXPECT_NE(d.status().message().find("data.synthetic.noise must be >= 0, got -0.5"),
            std::string::npos)
      << d.status();
  DataRequirements float_classes = Classification(2, 2, 0);
  float_classes.target_dtype = DType::kF32;
  d = SyntheticDataset::Create(Spec(10, 0.5), float_classes);
  EXPECT_NE(d.status().message().find("classification data has one i64 class id per sample"),
            std::string::npos)
      << d.status();
  DataRequirements int_regression = Regression(Shape{2}, Shape{2}, 0);
  int_regression.target_dtype = DType::kI64;
  d = SyntheticDataset::Create(Spec(10, 0.5), int_regression);
  EXPECT_NE(d.status().message().find("regression data has f32 targets"), std::string::npos)
      << d.status();
}

}  // namespace
}  // namespace gpipe
