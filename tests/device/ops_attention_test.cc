// Conformance of the attention ops family on every backend (see backends_under_test.h): the
// causal softmax and its backward against double-precision oracles.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {
namespace {

// Probabilities lie in [0, 1]: a float exp (~1 ulp), a float reciprocal of a double sum and one
// float product put each within a few 2^-24 relative of the exact value; 1e-6 absolute and
// relative leaves room for a GPU's fast exp while any indexing or masking error is >= 1e-3.
constexpr double kSoftmaxAbsTol = 1e-6;
constexpr double kSoftmaxRelTol = 1e-6;
// The backward combines two such factors and a length-t dot product of O(1) terms.
constexpr double kSoftmaxGradAbsTol = 2e-6;
constexpr double kSoftmaxGradRelTol = 2e-6;

// Row i of each [t, t] block: softmax over columns 0..i, zeros after.
std::vector<double> SoftmaxOracle(const std::vector<float>& scores, int64_t blocks, int64_t t) {
  std::vector<double> out(scores.size(), 0.0);
  for (int64_t r = 0; r < blocks * t; ++r) {
    const int64_t len = r % t + 1;
    double max = scores[r * t];
    for (int64_t s = 1; s < len; ++s) max = std::max(max, static_cast<double>(scores[r * t + s]));
    double sum = 0.0;
    for (int64_t s = 0; s < len; ++s) sum += std::exp(scores[r * t + s] - max);
    for (int64_t s = 0; s < len; ++s) out[r * t + s] = std::exp(scores[r * t + s] - max) / sum;
  }
  return out;
}

class AttentionOpsTest : public OpsConformanceTest {};

TEST_P(AttentionOpsTest, CausalSoftmaxForwardMatchesOracleWithExactZerosPastTheDiagonal) {
  constexpr int64_t kBlocks = 3, kT = 7;
  std::vector<float> scores = TestValues(11, kBlocks * kT * kT, -4.0f, 4.0f);
  // The last block's scores are large: without the max shift exp would overflow.
  for (int64_t i = 2 * kT * kT; i < kBlocks * kT * kT; ++i) scores[i] = 200.0f * scores[i];
  Tensor tensor = Upload(scores, Shape{kBlocks, kT, kT});
  ASSERT_TRUE(ops().attention.CausalSoftmaxForward(kBlocks, kT, tensor).ok());
  const std::vector<float> probs = Download(tensor);
  ExpectNear(probs, SoftmaxOracle(scores, kBlocks, kT), kSoftmaxRelTol, kSoftmaxAbsTol,
             "causal softmax");
  for (int64_t r = 0; r < kBlocks * kT; ++r) {
    for (int64_t s = r % kT + 1; s < kT; ++s) {
      EXPECT_EQ(probs[r * kT + s], 0.0f) << "row " << r << " column " << s;
    }
  }
}

TEST_P(AttentionOpsTest, CausalSoftmaxForwardEdgeSizes) {
  // t = 1: every row is a single 1.
  Tensor one = Upload({-3.0f, 5.0f}, Shape{2, 1, 1});
  ASSERT_TRUE(ops().attention.CausalSoftmaxForward(2, 1, one).ok());
  EXPECT_EQ(Download(one), (std::vector<float>{1.0f, 1.0f}));
  // No blocks: nothing to do.
  Tensor none = Upload({}, Shape{0, 4, 4});
  EXPECT_TRUE(ops().attention.CausalSoftmaxForward(0, 4, none).ok());
}

TEST_P(AttentionOpsTest, CausalSoftmaxBackwardMatchesOracle) {
  constexpr int64_t kBlocks = 2, kT = 6;
  constexpr float kScale = 0.35f;
  const std::vector<float> scores = TestValues(21, kBlocks * kT * kT, -3.0f, 3.0f);
  std::vector<float> probs;
  for (double p : SoftmaxOracle(scores, kBlocks, kT)) probs.push_back(static_cast<float>(p));
  // dP is non-zero past the diagonal too: those entries must still come back as exact zeros.
  const std::vector<float> dp = TestValues(22, kBlocks * kT * kT, -2.0f, 2.0f);
  std::vector<double> expected(dp.size(), 0.0);
  for (int64_t r = 0; r < kBlocks * kT; ++r) {
    const int64_t len = r % kT + 1;
    double dot = 0.0;
    for (int64_t s = 0; s < len; ++s)
      dot += static_cast<double>(dp[r * kT + s]) * probs[r * kT + s];
    for (int64_t s = 0; s < len; ++s) {
      expected[r * kT + s] =
          static_cast<double>(kScale) * probs[r * kT + s] * (dp[r * kT + s] - dot);
    }
  }
  const Tensor probs_t = Upload(probs, Shape{kBlocks, kT, kT});
  Tensor grad = Upload(dp, Shape{kBlocks, kT, kT});
  ASSERT_TRUE(ops().attention.CausalSoftmaxBackward(kBlocks, kT, kScale, probs_t, grad).ok());
  const std::vector<float> actual = Download(grad);
  ExpectNear(actual, expected, kSoftmaxGradRelTol, kSoftmaxGradAbsTol, "causal softmax backward");
  for (int64_t r = 0; r < kBlocks * kT; ++r) {
    for (int64_t s = r % kT + 1; s < kT; ++s) {
      EXPECT_EQ(actual[r * kT + s], 0.0f) << "row " << r << " column " << s;
    }
  }
}

TEST_P(AttentionOpsTest, ShapeMismatchesAreInvalidArguments) {
  Tensor scores = Upload(TestValues(1, 2 * 3 * 3), Shape{2, 3, 3});
  const Tensor small = Upload(TestValues(2, 3 * 3), Shape{1, 3, 3});
  const Tensor ids = UploadIds(std::vector<int64_t>(18, 0), Shape{2, 3, 3});
  const std::vector<std::pair<std::string, absl::Status>> results = {
      {"forward, wrong blocks", ops().attention.CausalSoftmaxForward(3, 3, scores)},
      {"forward, wrong t", ops().attention.CausalSoftmaxForward(2, 2, scores)},
      {"forward, negative t", ops().attention.CausalSoftmaxForward(2, -3, scores)},
      {"backward, probs of another size",
       ops().attention.CausalSoftmaxBackward(2, 3, 1.0f, small, scores)},
      {"backward, i64 probs", ops().attention.CausalSoftmaxBackward(2, 3, 1.0f, ids, scores)},
  };
  for (const auto& [what, status] : results) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << what << ": " << status;
    EXPECT_NE(status.message().find("CausalSoftmax"), std::string::npos) << what << ": " << status;
  }
}

GPIPE_INSTANTIATE_ON_EVERY_BACKEND(AttentionOpsTest);

}  // namespace
}  // namespace gpipe::testing
