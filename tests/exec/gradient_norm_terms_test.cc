// AddGradientSquareSums: each counted parameter's sum of squares, keyed by its place in the
// model. GlobalGradientNorm: rank 0 adds the stages' per-parameter terms in model parameter
// order, whatever order the stages reported them in, and counts replica 0 only.
#include "runtime/exec/gradient_norm_terms.h"

#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/exec/stage_chunks.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_loader.h"

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

constexpr char kPlan[] = R"pb(
  name: "norm-terms"
  model {
    input { shape: [ 4 ] }
    layers {
      name: "fc1"
      linear { out_features: 3 }
    }
    layers {
      name: "fc2"
      linear { out_features: 2 }
    }
    loss { softmax_cross_entropy {} }
  }
  pipeline { stages: 1 micro_batches: 1 }
  training {
    global_batch: 2
    steps: 1
    optimizer { sgd { lr: 0.1 } }
  }
  data { synthetic { num_samples: 4 } }
)pb";

// On the CPU the sums are the host's element-order double sums, exactly (the arithmetic the
// norm had before it moved onto the device), reported in term order with the terms' keys.
TEST(AddGradientSquareSumsTest, ReportsEachTermsElementOrderSumWithItsKey) {
  absl::StatusOr<LoadedPlan> loaded = ParsePlanText(kPlan, "norm_terms.pbtxt", ".", {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  absl::StatusOr<AnalyzedPlan> analyzed = AnalyzePlan(*loaded, registry);
  ASSERT_TRUE(analyzed.ok()) << analyzed.status();
  CpuDevice device;
  absl::StatusOr<StageChunks> chunks = StageChunks::Create(
      device, analyzed->plan, StageChunks::SpecsForStage(ToStageSpecs(*analyzed), 0, {}), registry);
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  const std::vector<ChunkRefs> refs = chunks->refs();
  const std::vector<GradientNormTerm> terms = GradientNormTermsFor(refs, {});
  ASSERT_EQ(terms.size(), 4u);  // fc1.weight, fc1.bias, fc2.weight, fc2.bias

  std::vector<double> expected;
  for (const GradientNormTerm& term : terms) {
    Tensor grad = refs[term.slot.chunk].parameters->grads()[term.slot.index];
    double sum = 0;
    for (int64_t i = 0; i < grad.num_elements(); ++i) {
      grad.f32()[i] = 0.1f * static_cast<float>((i + 1) * (term.slot.index + 1)) - 0.7f;
      sum += static_cast<double>(grad.f32()[i]) * static_cast<double>(grad.f32()[i]);
    }
    expected.push_back(sum);
  }
  pb::StepReport report;
  ASSERT_TRUE(AddGradientSquareSums(terms, refs, device, report).ok());
  ASSERT_EQ(report.grad_square_sums_size(), 4);
  for (int i = 0; i < 4; ++i) {
    const pb::GradSquareSum& reported = report.grad_square_sums(i);
    EXPECT_EQ(reported.layer(), i / 2) << i;
    EXPECT_EQ(reported.parameter(), i % 2) << i;
    EXPECT_EQ(reported.sum(), expected[i]) << i;
  }
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
