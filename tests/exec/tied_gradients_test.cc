// SumTiedGradients: the gradients of a tie's members on one stage summed in member order, then
// over the tie's ranks, and the sum given to every member; the members found once, by name, as
// (chunk, parameter index) slots (StageChunks::SlotsOf).
#include "runtime/exec/tied_gradients.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/exec/stage_chunks.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_loader.h"

namespace gpipe {
namespace {

// fc1 and fc2 have weights of the same shape (4 x 4).
constexpr char kPlan[] = R"pb(
  name: "ties"
  model {
    input { shape: [ 4 ] }
    layers {
      name: "fc1"
      linear { out_features: 4 }
    }
    layers {
      name: "fc2"
      linear { out_features: 4 }
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

// Sums as if the tie's other rank held the same values: x * 2.
class DoublingGroup final : public ReduceGroup {
 public:
  absl::StatusOr<std::unique_ptr<TransferHandle>> StartCollective(
      Collective collective, int bucket, std::span<Tensor> tensors) override {
    if (collective != Collective::kAllReduce) {
      return absl::UnimplementedError(CollectiveName(collective));
    }
    started.push_back(bucket);
    for (Tensor& t : tensors) {
      for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] *= 2.0f;
    }
    return std::unique_ptr<TransferHandle>(std::make_unique<DoneHandle>());
  }
  const std::vector<std::vector<int64_t>>& buckets() const override { return buckets_; }

  std::vector<int> started;

 private:
  class DoneHandle final : public TransferHandle {
   public:
    bool Done() override { return true; }
    absl::Status Wait(absl::Time) override { return absl::OkStatus(); }
  };
  std::vector<std::vector<int64_t>> buckets_ = {{16}};
};

class TiedGradientsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<LoadedPlan> loaded = ParsePlanText(kPlan, "ties.pbtxt", ".", {});
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const LayerRegistry registry = LayerRegistry::WithBuiltins();
    absl::StatusOr<AnalyzedPlan> analyzed = AnalyzePlan(*loaded, registry);
    ASSERT_TRUE(analyzed.ok()) << analyzed.status();
    absl::StatusOr<StageChunks> chunks =
        StageChunks::Create(device_, analyzed->plan,
                            StageChunks::SpecsForStage(ToStageSpecs(*analyzed), 0, {}), registry);
    ASSERT_TRUE(chunks.ok()) << chunks.status();
    chunks_ = std::make_unique<StageChunks>(*std::move(chunks));
  }

  // The one slot of parameter `name`, its gradient filled with `value`.
  ParameterSlot Member(const std::string& name, float value) {
    const std::vector<ParameterSlot> slots = chunks_->SlotsOf(name);
    EXPECT_EQ(slots.size(), 1u) << name;
    Tensor grad = Grad(slots.at(0));
    EXPECT_TRUE(device_.ops().tensor.Fill(grad, value).ok());
    return slots.at(0);
  }
  Tensor Grad(ParameterSlot slot) const {
    return chunks_->parameters(slot.chunk).grads()[slot.index];
  }

  CpuDevice device_;
  std::unique_ptr<StageChunks> chunks_;
};

TEST_F(TiedGradientsTest, SlotsNameTheChunkAndPositionOfAParameter) {
  const std::vector<ParameterSlot> slots = chunks_->SlotsOf("fc2.weight");
  ASSERT_EQ(slots.size(), 1u);
  EXPECT_EQ(slots[0].chunk, 0);
  EXPECT_EQ(chunks_->parameters(0).names()[slots[0].index], "fc2.weight");
  EXPECT_TRUE(chunks_->SlotsOf("fc3.weight").empty());
}

TEST_F(TiedGradientsTest, MembersOnOneRankGetTheirSum) {
  const TiedGradientSum tie{.members = {Member("fc1.weight", 1.0f), Member("fc2.weight", 2.0f)}};
  ASSERT_TRUE(SumTiedGradients(tie, chunks_->refs(), device_, absl::Now() + absl::Seconds(1)).ok());
  for (const ParameterSlot& slot : tie.members) {
    const Tensor grad = Grad(slot);
    for (int64_t i = 0; i < grad.num_elements(); ++i) EXPECT_EQ(grad.f32()[i], 3.0f);
  }
}

TEST_F(TiedGradientsTest, TheLocalSumIsReducedOverTheTiesRanksOnceThenCopiedToEveryMember) {
  DoublingGroup group;
  const TiedGradientSum tie{.members = {Member("fc1.weight", 1.0f), Member("fc2.weight", 2.0f)},
                            .group = &group,
                            .what =
                                "summing the gradients of tied parameters fc1.weight, "
                                "fc2.weight over ranks [0, 1]"};
  ASSERT_TRUE(SumTiedGradients(tie, chunks_->refs(), device_, absl::Now() + absl::Seconds(1)).ok());
  EXPECT_EQ(group.started, (std::vector<int>{0}));
  for (const ParameterSlot& slot : tie.members) {
    const Tensor grad = Grad(slot);
    for (int64_t i = 0; i < grad.num_elements(); ++i) EXPECT_EQ(grad.f32()[i], 6.0f);
  }
  // Other parameters are left alone.
  const Tensor bias = Grad(chunks_->SlotsOf("fc1.bias").at(0));
  EXPECT_EQ(bias.f32()[0], 0.0f);
}

}  // namespace
}  // namespace gpipe
