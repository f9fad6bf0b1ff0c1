// GlobalGradientNorm: rank 0 adds the stages' per-parameter terms in model parameter order,
// whatever order the stages reported them in, and counts replica 0 only.
#include "runtime/exec/gradient_norm_terms.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace gpipe {
namespace {

pb::StepReport Report(int replica, const std::vector<std::pair<int, double>>& layer_sums) {
  pb::StepReport report;
  report.set_replica(replica);
  for (const auto& [layer, sum] : layer_sums) {
    pb::GradSquareSum& term = *report.add_grad_square_sums();
    term.set_layer(layer);
    term.set_parameter(0);
    term.set_sum(sum);
  }
  return report;
}

TEST(GlobalGradientNormTest, AddsInModelParameterOrderWhateverTheCut) {
  // In model order 1 + 1 + 1e16 = 1e16 + 2 exactly; the other way round the ones would be lost.
  const double expected = std::sqrt(1e16 + 2);
  const std::vector<pb::StepReport> one_stage = {Report(0, {{0, 1.0}, {1, 1.0}, {2, 1e16}})};
  const std::vector<pb::StepReport> reversed = {Report(0, {{2, 1e16}}),
                                                Report(0, {{1, 1.0}, {0, 1.0}})};
  EXPECT_EQ(GlobalGradientNorm(one_stage), expected);
  EXPECT_EQ(GlobalGradientNorm(reversed), expected);
}

TEST(GlobalGradientNormTest, CountsTheFirstReplicaOnly) {
  // After the all-reduce every replica holds the same gradients.
  const std::vector<pb::StepReport> reports = {Report(0, {{0, 9.0}}), Report(0, {{1, 16.0}}),
                                               Report(1, {{0, 9.0}}), Report(1, {{1, 16.0}})};
  EXPECT_EQ(GlobalGradientNorm(reports), 5.0);
}

}  // namespace
}  // namespace gpipe
