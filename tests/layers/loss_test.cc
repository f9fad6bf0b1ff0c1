// softmax_cross_entropy and mse against independently computed values
// (tests/layers/oracles/layer_oracles.py), their mini-batch-mean scaling, accuracy counting,
// numerical stability and the errors a user can cause.
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/gradient_check.h"
#include "tests/layers/make_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

TEST(SoftmaxCrossEntropyTest, MatchesIndependentValues) {
  CpuDevice device;
  std::unique_ptr<Loss> loss = MakeLoss("softmax_cross_entropy {}");
  const Tensor output =
      F32Tensor(device, Shape{3, 4},
                {0.5f, -1.0f, 2.0f, 0.0f, 3.0f, 1.0f, -2.0f, 0.5f, 0.1f, 0.2f, 0.3f, 0.4f});
  const Tensor targets = I64Tensor(device, Shape{3}, {2, 0, 3});
  absl::StatusOr<LossResult> result =
      ComputeLoss(*loss, device, output, targets, /*global_batch=*/6);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NEAR(result->loss, 0.297856427, 1e-7);
  EXPECT_THAT(
      Values(result->grad),
      Pointwise(FloatNear(1e-7), {0.0264074516f, 0.00589229893f, -0.0483166795f, 0.016016929f,
                                  -0.0305186894f, 0.0184256251f, 0.000917357856f, 0.0111757065f,
                                  0.0356397034f, 0.0393879638f, 0.043530432f, -0.118558099f}));
  EXPECT_EQ(result->correct, 3);
}

TEST(SoftmaxCrossEntropyTest, CountsArgmaxHits) {
  CpuDevice device;
  std::unique_ptr<Loss> loss = MakeLoss("softmax_cross_entropy {}");
  const Tensor output =
      F32Tensor(device, Shape{3, 3}, {1.0f, 5.0f, 0.0f, 2.0f, 1.0f, 0.0f, 0.0f, 0.0f, 9.0f});
  const Tensor targets = I64Tensor(device, Shape{3}, {1, 2, 2});
  absl::StatusOr<LossResult> result = ComputeLoss(*loss, device, output, targets, 3);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->correct, 2);
}

TEST(SoftmaxCrossEntropyTest, IsStableForHugeLogits) {
  CpuDevice device;
  std::unique_ptr<Loss> loss = MakeLoss("softmax_cross_entropy {}");
  const Tensor output =
      F32Tensor(device, Shape{2, 3}, {1000.0f, 1002.0f, 999.0f, -1000.0f, 0.0f, 1000.0f});
  const Tensor targets = I64Tensor(device, Shape{2}, {0, 2});
  absl::StatusOr<LossResult> result = ComputeLoss(*loss, device, output, targets, 2);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NEAR(result->loss, 1.08492301, 1e-6);
  for (float g : Values(result->grad)) EXPECT_TRUE(std::isfinite(g));
}

// Micro-batch shares add up to the loss and gradient of the whole mini-batch.
TEST(SoftmaxCrossEntropyTest, MicroBatchSharesSumToTheMiniBatchMean) {
  CpuDevice device;
  std::unique_ptr<Loss> loss = MakeLoss("softmax_cross_entropy {}");
  const Tensor output = UniformTensor(device, Shape{6, 5}, 1, -3.0f, 3.0f);
  const Tensor targets = I64Tensor(device, Shape{6}, {0, 1, 2, 3, 4, 0});
  absl::StatusOr<LossResult> whole = ComputeLoss(*loss, device, output, targets, 6);
  ASSERT_TRUE(whole.ok()) << whole.status();
  double sum = 0.0;
  std::vector<float> grads;
  for (int64_t begin = 0; begin < 6; begin += 2) {
    absl::StatusOr<LossResult> part =
        ComputeLoss(*loss, device, *output.SliceRows(begin, begin + 2),
                    *targets.SliceRows(begin, begin + 2), 6);
    ASSERT_TRUE(part.ok()) << part.status();
    sum += part->loss;
    for (float g : Values(part->grad)) grads.push_back(g);
  }
  EXPECT_NEAR(sum, whole->loss, 1e-12);
  EXPECT_THAT(grads, Pointwise(FloatNear(0.0f), Values(whole->grad)));
}

TEST(SoftmaxCrossEntropyTest, RejectsAClassIdOutOfRangeNamingTheSample) {
  CpuDevice device;
  std::unique_ptr<Loss> loss = MakeLoss("softmax_cross_entropy {}");
  const Tensor output = UniformTensor(device, Shape{3, 4}, 1, -1.0f, 1.0f);
  for (const int64_t bad : {int64_t{4}, int64_t{-1}}) {
    absl::StatusOr<LossResult> result =
        ComputeLoss(*loss, device, output, I64Tensor(device, Shape{3}, {0, bad, 1}), 3);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(result.status().message()),
                HasSubstr(absl::StrCat("sample 1 of the batch has class id ", bad)));
  }
}

// The data path's check (before the upload) gives Compute's error for the first bad class id:
// first, middle or last position, negative, or the class count itself.
TEST(SoftmaxCrossEntropyTest, HostTargetCheckGivesComputesErrorForTheFirstBadId) {
  CpuDevice device;
  std::unique_ptr<Loss> loss = MakeLoss("softmax_cross_entropy {}");
  // Per sample: 2 positions of 4 classes.
  const Shape per_sample_output{2, 4};
  const Tensor output = UniformTensor(device, Shape{3, 2, 4}, 1, -1.0f, 1.0f);
  struct Case {
    std::vector<int64_t> ids;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{4, 0, 1, 2, 3, 0}, "sample 0 of the batch, position 0, has class id 4"},
      {{0, 1, 2, -1, 3, 9}, "sample 1 of the batch, position 1, has class id -1"},
      {{0, 1, 2, 3, 3, 4}, "sample 2 of the batch, position 1, has class id 4"},
  };
  for (const Case& c : cases) {
    const Tensor targets = I64Tensor(device, Shape{3, 2}, c.ids);
    const absl::Status checked = loss->CheckHostTargets(per_sample_output, targets);
    EXPECT_EQ(checked.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(checked.message()), HasSubstr(c.says));
    EXPECT_THAT(std::string(checked.message()), HasSubstr("outside [0, 4)"));
    const absl::StatusOr<LossResult> result = ComputeLoss(*loss, device, output, targets, 3);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(checked, result.status()) << "the host check and Compute word it the same";
  }
  EXPECT_TRUE(
      loss->CheckHostTargets(per_sample_output, I64Tensor(device, Shape{3, 2}, {0, 3, 3, 3, 2, 1}))
          .ok());
  EXPECT_EQ(loss->CheckHostTargets(per_sample_output, I64Tensor(device, Shape{5}, {0, 1, 2, 3, 0}))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MeanSquaredErrorTest, HostTargetCheckAcceptsAnyValues) {
  CpuDevice device;
  std::unique_ptr<Loss> loss = MakeLoss("mse {}");
  EXPECT_TRUE(
      loss->CheckHostTargets(Shape{2}, UniformTensor(device, Shape{3, 2}, 1, -1e9f, 1e9f)).ok());
}

TEST(SoftmaxCrossEntropyTest, RejectsMismatchedTargets) {
  CpuDevice device;
  std::unique_ptr<Loss> loss = MakeLoss("softmax_cross_entropy {}");
  const Tensor output = UniformTensor(device, Shape{3, 4}, 1, -1.0f, 1.0f);
  EXPECT_EQ(
      ComputeLoss(*loss, device, output, I64Tensor(device, Shape{2}, {0, 1}), 3).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeLoss(*loss, device, output, UniformTensor(device, Shape{3}, 1, 0.0f, 1.0f), 3)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ComputeLoss(*loss, device, output, I64Tensor(device, Shape{3}, {0, 1, 2}), 0).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(SoftmaxCrossEntropyTest, RequiresTwoOrMoreClassesPerPrediction) {
  std::unique_ptr<Loss> loss = MakeLoss("softmax_cross_entropy {}");
  EXPECT_TRUE(loss->ValidateOutputShape(Shape{10}).ok());
  EXPECT_TRUE(loss->ValidateOutputShape(Shape{2}).ok());
  EXPECT_TRUE(loss->ValidateOutputShape(Shape{4, 10}).ok());  // one prediction per position
  EXPECT_EQ(loss->ValidateOutputShape(Shape{1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loss->ValidateOutputShape(Shape{4, 1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loss->ValidateOutputShape(Shape{}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loss->target_dtype(), DType::kI64);
  EXPECT_EQ(loss->target_shape(Shape{10}), Shape{});
  EXPECT_EQ(loss->target_shape(Shape{4, 10}), Shape{4});
  EXPECT_EQ(loss->type(), "softmax_cross_entropy");
}

// A sequence output [b, P, C] is the mean over all b*P positions: the same as the [b*P, C]
// classification of those rows with a mini-batch of b*P, for the loss, the gradient and the
// count of correct predictions.
TEST(SoftmaxCrossEntropyTest, PerPositionLossIsTheMeanOverEveryPosition) {
  CpuDevice device;
  std::unique_ptr<Loss> loss = MakeLoss("softmax_cross_entropy {}");
  const Tensor logits = UniformTensor(device, Shape{2, 3, 4}, 5, -2.0f, 2.0f);
  const std::vector<int64_t> ids = {0, 3, 1, 2, 2, 0};
  absl::StatusOr<LossResult> sequence =
      ComputeLoss(*loss, device, logits, I64Tensor(device, Shape{2, 3}, ids), /*global_batch=*/4);
  ASSERT_TRUE(sequence.ok()) << sequence.status();
  absl::StatusOr<Tensor> rows = logits.Reshaped(Shape{6, 4});
  ASSERT_TRUE(rows.ok());
  absl::StatusOr<LossResult> flat =
      ComputeLoss(*loss, device, *rows, I64Tensor(device, Shape{6}, ids), /*global_batch=*/12);
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_DOUBLE_EQ(sequence->loss, flat->loss);
  EXPECT_EQ(Values(sequence->grad), Values(flat->grad));
  EXPECT_EQ(sequence->correct, flat->correct);
  EXPECT_EQ(sequence->grad.shape(), (Shape{2, 3, 4}));
  // Targets must be shaped like the output without its class dimension.
  EXPECT_EQ(ComputeLoss(*loss, device, logits, I64Tensor(device, Shape{6}, ids), 4).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MseTest, MatchesIndependentValues) {
  CpuDevice device;
  std::unique_ptr<Loss> loss = MakeLoss("mse {}");
  const Tensor output = F32Tensor(device, Shape{2, 3}, {0.5f, -1.0f, 2.0f, 0.0f, 3.0f, 1.5f});
  const Tensor targets = F32Tensor(device, Shape{2, 3}, {1.0f, -1.0f, 0.0f, 0.25f, 2.0f, -0.5f});
  absl::StatusOr<LossResult> result =
      ComputeLoss(*loss, device, output, targets, /*global_batch=*/4);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NEAR(result->loss, 0.776041667, 1e-8);
  EXPECT_THAT(Values(result->grad),
              Pointwise(FloatNear(1e-7), {-0.0833333332f, 0.0f, 0.333333333f, -0.0416666667f,
                                          0.166666667f, 0.333333333f}));
  EXPECT_EQ(result->correct, -1);
}

TEST(MseTest, MeansOverEveryElementOfRank2Samples) {
  CpuDevice device;
  std::unique_ptr<Loss> loss = MakeLoss("mse {}");
  // One sample of shape [2, 2], every error 2: mean squared error 4.
  absl::StatusOr<LossResult> result =
      ComputeLoss(*loss, device, F32Tensor(device, Shape{1, 2, 2}, {3.0f, 3.0f, 3.0f, 3.0f}),
                  F32Tensor(device, Shape{1, 2, 2}, {1.0f, 1.0f, 1.0f, 1.0f}), 1);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_DOUBLE_EQ(result->loss, 4.0);
  EXPECT_THAT(Values(result->grad), Pointwise(FloatNear(0.0f), {1.0f, 1.0f, 1.0f, 1.0f}));
}

TEST(MseTest, RejectsTargetsOfAnotherShapeOrType) {
  CpuDevice device;
  std::unique_ptr<Loss> loss = MakeLoss("mse {}");
  const Tensor output = UniformTensor(device, Shape{2, 3}, 1, -1.0f, 1.0f);
  absl::StatusOr<LossResult> result =
      ComputeLoss(*loss, device, output, UniformTensor(device, Shape{2, 2}, 1, -1.0f, 1.0f), 2);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("shaped like the output"));
  EXPECT_EQ(
      ComputeLoss(*loss, device, output, I64Tensor(device, Shape{2, 3}, {0, 0, 0, 0, 0, 0}), 2)
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loss->target_dtype(), DType::kF32);
  EXPECT_EQ(loss->target_shape(Shape{3, 4}), (Shape{3, 4}));
}

TEST(CreateLossTest, BuildsEachKindAndRejectsAMissingOne) {
  EXPECT_EQ(MakeLoss("softmax_cross_entropy {}")->type(), "softmax_cross_entropy");
  EXPECT_EQ(MakeLoss("mse {}")->type(), "mse");
  absl::StatusOr<std::unique_ptr<Loss>> none = CreateLoss(pb::Loss());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("softmax_cross_entropy"));
}

}  // namespace
}  // namespace gpipe::testing
