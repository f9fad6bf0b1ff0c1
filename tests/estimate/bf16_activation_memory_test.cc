// What `gpipe-plan show` predicts under training.precision BF16 (bf16 activation storage) against
// FP32, on the examples: boundary tensors and their gradients take exactly half the bytes, and so
// do the activations of a model of top-level layers (the MLP) and of a transformer, whose blocks
// keep their inner activations (inner layers' outputs, attention's qkv and O) as bf16 too; only
// norm statistics, attention's log-sum-exp and dropout masks stay f32.
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/estimate/schedule_prediction.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_loader.h"

namespace gpipe {
namespace {

std::vector<StageActivationMemory> Predict(const std::string& example,
                                           const std::string& precision) {
  absl::StatusOr<LoadedPlan> loaded =
      LoadPlanFile(std::string(GPIPE_EXAMPLES_DIR) + "/" + example + "/plan.pbtxt",
                   {"training { precision: " + precision + " }", "runtime { device: CPU }"});
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  absl::StatusOr<AnalyzedPlan> analyzed = AnalyzePlan(*loaded, registry);
  EXPECT_TRUE(analyzed.ok()) << analyzed.status();
  absl::StatusOr<SchedulePrediction> prediction = PredictSchedule(*analyzed, registry);
  EXPECT_TRUE(prediction.ok()) << prediction.status();
  return prediction->activations;
}

// Per stage: boundary tensors (beyond the data set's input on stage 0) and received or sent
// gradients (beyond the loss's f32 gradient on the last stage) halve exactly; activations shrink.
void ExpectBoundariesHalve(const std::vector<StageActivationMemory>& fp32,
                           const std::vector<StageActivationMemory>& bf16) {
  ASSERT_EQ(fp32.size(), bf16.size());
  const size_t last = fp32.size() - 1;
  for (size_t s = 0; s < fp32.size(); ++s) {
    SCOPED_TRACE(s);
    if (s > 0) {
      EXPECT_EQ(2 * bf16[s].boundary, fp32[s].boundary);
    }
    if (s < last) {
      EXPECT_EQ(2 * bf16[s].boundary_grad, fp32[s].boundary_grad);
    }
    EXPECT_LT(bf16[s].activation, fp32[s].activation);
    std::printf("stage %zu activation bf16/fp32 = %lld/%lld = %.3f\n", s,
                static_cast<long long>(bf16[s].activation),
                static_cast<long long>(fp32[s].activation),
                static_cast<double>(bf16[s].activation) / static_cast<double>(fp32[s].activation));
  }
}

TEST(Bf16ActivationMemoryTest, MlpStoresHalfTheBytes) {
  const std::vector<StageActivationMemory> fp32 = Predict("mlp", "FP32");
  const std::vector<StageActivationMemory> bf16 = Predict("mlp", "BF16");
  ExpectBoundariesHalve(fp32, bf16);
  // Layer outputs halve; only layer norm's statistics and dropout's mask stay f32.
  for (size_t s = 0; s < fp32.size(); ++s) {
    SCOPED_TRACE(s);
    EXPECT_LE(bf16[s].activation, fp32[s].activation * 51 / 100);
  }
}

TEST(Bf16ActivationMemoryTest, CharTransformerStoresNearlyHalfTheBytes) {
  const std::vector<StageActivationMemory> fp32 = Predict("char_transformer", "FP32");
  const std::vector<StageActivationMemory> bf16 = Predict("char_transformer", "BF16");
  ExpectBoundariesHalve(fp32, bf16);
  // Issue 28's target was 0.6; what stays f32 (statistics, log-sum-exp) is about 1%.
  for (size_t s = 0; s < fp32.size(); ++s) {
    SCOPED_TRACE(s);
    EXPECT_LE(bf16[s].activation, fp32[s].activation * 52 / 100);
  }
}

}  // namespace
}  // namespace gpipe
