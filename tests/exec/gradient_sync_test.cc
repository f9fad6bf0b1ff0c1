// GradientBuckets (how a stage's gradients are cut into all-reduce buckets) and GradientSync
// (when each bucket's all-reduce starts during a step), against a recording ReduceGroup.
#include "runtime/exec/gradient_sync.h"

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/core/check.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/exec/gradient_buckets.h"
#include "runtime/exec/sharded_update.h"
#include "runtime/exec/stage_chunks.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_loader.h"

namespace gpipe {
namespace {

// fc1 (16x6 + 16 floats), relu, fc2 (12x16 + 12), bn (no parameters, 2 buffers of 12),
// fc3 (4x12 + 4).
constexpr char kPlan[] = R"pb(
  name: "buckets"
  model {
    input { shape: [ 6 ] }
    layers {
      name: "fc1"
      linear { out_features: 16 }
    }
    layers {
      name: "act1"
      relu {}
    }
    layers {
      name: "fc2"
      linear { out_features: 12 }
    }
    layers {
      name: "bn"
      batch_norm1d { affine: false }
    }
    layers {
      name: "fc3"
      linear { out_features: 4 }
    }
    loss { softmax_cross_entropy {} }
  }
  pipeline { stages: 1 micro_batches: 3 }
  training {
    global_batch: 6
    steps: 1
    optimizer { sgd { lr: 0.1 } }
  }
  data { synthetic { num_samples: 12 } }
)pb";

// Sums by pretending every other replica holds the same values: x * replicas. Each handle is
// done after `polls` calls of Done().
class RecordingGroup final : public ReduceGroup {
 public:
  RecordingGroup(std::vector<std::vector<int64_t>> buckets, int replicas, int polls)
      : buckets_(std::move(buckets)), replicas_(replicas), polls_(polls) {}

  absl::StatusOr<std::unique_ptr<TransferHandle>> StartCollective(
      Collective collective, int bucket, std::span<Tensor> tensors) override {
    if (collective == Collective::kAllGather) {
      return absl::UnimplementedError(CollectiveName(collective));
    }
    // A reduce-scatter sums like the all-reduce here: a member may hold more than its part.
    started.push_back(bucket);
    collectives.push_back(collective);
    return std::unique_ptr<TransferHandle>(std::make_unique<Handle>(
        std::vector<Tensor>(tensors.begin(), tensors.end()), replicas_, polls_));
  }
  const std::vector<std::vector<int64_t>>& buckets() const override { return buckets_; }

  std::vector<int> started;
  std::vector<Collective> collectives;

 private:
  class Handle final : public TransferHandle {
   public:
    Handle(std::vector<Tensor> tensors, int replicas, int polls)
        : tensors_(std::move(tensors)), replicas_(replicas), polls_(polls) {}
    bool Done() override {
      if (!finished_ && --polls_ <= 0) Finish();
      return finished_;
    }
    absl::Status Wait(absl::Time) override {
      if (!finished_) Finish();
      return absl::OkStatus();
    }

   private:
    void Finish() {
      finished_ = true;
      for (Tensor& t : tensors_) {
        for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] *= static_cast<float>(replicas_);
      }
    }
    std::vector<Tensor> tensors_;
    int replicas_;
    int polls_;
    bool finished_ = false;
  };

  std::vector<std::vector<int64_t>> buckets_;
  int replicas_;
  int polls_;
};

class GradientSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<LoadedPlan> loaded = ParsePlanText(kPlan, "buckets.pbtxt", ".", {});
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

  static std::vector<int64_t> Counts(const GradientBuckets::Bucket& bucket) {
    std::vector<int64_t> counts;
    for (const Tensor& t : bucket.tensors) counts.push_back(t.num_elements());
    return counts;
  }

  CpuDevice device_;
  std::unique_ptr<StageChunks> chunks_;
};

TEST_F(GradientSyncTest, OneByteBucketsHoldOneLayerEachLastLayerFirstThenTheBuffers) {
  const GradientBuckets buckets = GradientBuckets::Plan(chunks_->refs(), 1);
  ASSERT_EQ(buckets.buckets().size(), 4u);
  EXPECT_EQ(buckets.gradient_buckets(), 3);
  EXPECT_EQ(Counts(buckets.buckets()[0]), (std::vector<int64_t>{48, 4}));    // fc3
  EXPECT_EQ(Counts(buckets.buckets()[1]), (std::vector<int64_t>{192, 12}));  // fc2
  EXPECT_EQ(Counts(buckets.buckets()[2]), (std::vector<int64_t>{96, 16}));   // fc1
  EXPECT_TRUE(buckets.buckets()[3].buffers);
  EXPECT_EQ(Counts(buckets.buckets()[3]), (std::vector<int64_t>{12, 12}));
  EXPECT_EQ(buckets.BucketOf(0, 4), 0);
  EXPECT_EQ(buckets.BucketOf(0, 1), -1);  // relu: no parameters
  EXPECT_EQ(buckets.BucketOf(0, 3), -1);  // batch norm without affine parameters
}

TEST_F(GradientSyncTest, ShardedStateReduceScattersTheGradientsAndAllReducesTheBuffers) {
  GradientBuckets buckets = GradientBuckets::Plan(chunks_->refs(), 1);
  // Each bucket knows its gradients' parameters, which the replicas gather after the update.
  for (const GradientBuckets::Bucket& bucket : buckets.buckets()) {
    if (bucket.buffers) {
      EXPECT_TRUE(bucket.values.empty());
      continue;
    }
    ASSERT_EQ(bucket.values.size(), bucket.tensors.size());
    for (size_t t = 0; t < bucket.values.size(); ++t) {
      EXPECT_EQ(bucket.values[t].shape(), bucket.tensors[t].shape());
    }
  }
  RecordingGroup group(buckets.Layout(), /*replicas=*/2, /*polls=*/1);
  ExecutorConfig config;
  pb::StepCommand command;
  const StepScope scope(config, command, nullptr);
  GradientSync sync(buckets, group, device_, scope, /*micro_batches=*/1, /*replicas=*/2,
                    Collective::kReduceScatter);
  for (int layer : {4, 3, 2, 1, 0}) ASSERT_TRUE(sync.Accumulated(0, layer).ok());
  ASSERT_TRUE(sync.Finish(absl::Now() + absl::Seconds(1)).ok());
  EXPECT_EQ(group.started, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(group.collectives,
            (std::vector<Collective>{Collective::kReduceScatter, Collective::kReduceScatter,
                                     Collective::kReduceScatter, Collective::kAllReduce}));
}

TEST(AssignBucketsTest, ABucketClosesOnceItHoldsTheThresholdLayersWithoutBytesStayOut) {
  const std::vector<int64_t> bytes = {300, 0, 500, 100, 0, 900, 50};
  EXPECT_EQ(AssignBuckets(bytes, 800), (std::vector<int>{0, -1, 0, 1, -1, 1, 2}));
  EXPECT_EQ(AssignBuckets(bytes, 1), (std::vector<int>{0, -1, 1, 2, -1, 3, 4}));
  EXPECT_EQ(AssignBuckets(bytes, int64_t{1} << 40), (std::vector<int>{0, -1, 0, 0, -1, 0, 0}));
}

TEST_F(GradientSyncTest, BucketsCloseAtTheByteThreshold) {
  // fc3 is 208 bytes, fc2 816: a 900-byte threshold closes the first bucket after fc2.
  const GradientBuckets buckets = GradientBuckets::Plan(chunks_->refs(), 900);
  ASSERT_EQ(buckets.gradient_buckets(), 2);
  EXPECT_EQ(buckets.buckets()[0].layers.size(), 2u);
  EXPECT_EQ(buckets.buckets()[0].bytes, (48 + 4 + 192 + 12) * 4);
  EXPECT_EQ(buckets.buckets()[1].layers.size(), 1u);
  const GradientBuckets whole = GradientBuckets::Plan(chunks_->refs(), int64_t{1} << 40);
  EXPECT_EQ(whole.gradient_buckets(), 1);
}

TEST_F(GradientSyncTest, ABucketStartsWhenItsLastLayerTookTheLastMicroBatch) {
  GradientBuckets buckets = GradientBuckets::Plan(chunks_->refs(), 1);
  RecordingGroup group(buckets.Layout(), /*replicas=*/2, /*polls=*/2);
  ExecutorConfig config;
  config.micro_batches = 3;
  pb::StepCommand command;
  const StepScope scope(config, command, nullptr);
  GradientSync sync(buckets, group, device_, scope, /*micro_batches=*/3, /*replicas=*/2);
  for (Tensor& g : buckets.buckets()[0].tensors)
    ASSERT_TRUE(device_.ops().tensor.Fill(g, 1.0).ok());
  for (Tensor& b : buckets.buckets()[3].tensors)
    ASSERT_TRUE(device_.ops().tensor.Fill(b, 5.0).ok());
  // Micro-batches 0 and 1: a whole backward each (fc3, fc2, fc1 = local layers 4, 2, 0).
  for (int m = 0; m < 2; ++m) {
    for (int layer : {4, 3, 2, 1, 0}) ASSERT_TRUE(sync.Accumulated(0, layer).ok());
  }
  EXPECT_TRUE(group.started.empty());
  // The last micro-batch: fc3's bucket starts as soon as fc3 is done, before fc2's backward.
  ASSERT_TRUE(sync.Accumulated(0, 4).ok());
  EXPECT_EQ(group.started, (std::vector<int>{0}));
  ASSERT_TRUE(sync.Accumulated(0, 3).ok());
  ASSERT_TRUE(sync.Accumulated(0, 2).ok());
  EXPECT_EQ(group.started, (std::vector<int>{0, 1}));
  ASSERT_TRUE(sync.Accumulated(0, 1).ok());
  ASSERT_TRUE(sync.Accumulated(0, 0).ok());
  // The buffers wait for the step's end (a later forward may still update them).
  EXPECT_EQ(group.started, (std::vector<int>{0, 1, 2}));
  ASSERT_TRUE(sync.Finish(absl::Now() + absl::Seconds(1)).ok());
  EXPECT_EQ(group.started, (std::vector<int>{0, 1, 2, 3}));
  // Gradients summed (x2), buffers averaged (x2 / 2).
  EXPECT_EQ(buckets.buckets()[0].tensors[0].f32()[0], 2.0f);
  EXPECT_EQ(buckets.buckets()[3].tensors[0].f32()[0], 5.0f);
  pb::StepReport report;
  sync.Report(report);
  EXPECT_EQ(report.all_reduce_buckets(), 4);
  // Nothing accumulates after the step's all-reduce.
  EXPECT_EQ(sync.Accumulated(0, 4).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(GradientSyncTest, MoreAccumulationsThanMicroBatchesIsAnError) {
  GradientBuckets buckets = GradientBuckets::Plan(chunks_->refs(), 1);
  RecordingGroup group(buckets.Layout(), 2, 1);
  ExecutorConfig config;
  pb::StepCommand command;
  const StepScope scope(config, command, nullptr);
  GradientSync sync(buckets, group, device_, scope, /*micro_batches=*/1, /*replicas=*/2);
  ASSERT_TRUE(sync.Accumulated(0, 0).ok());
  const absl::Status twice = sync.Accumulated(0, 0);
  EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(twice.message(),
            "chunk 0 layer 0 accumulated gradients 2 times in a step of 1 "
            "micro-batches");
}

// A group that records the all-gathers started and the buckets waited for; `failing` fails its
// wait.
class GatherRecordingGroup final : public ReduceGroup {
 public:
  explicit GatherRecordingGroup(std::vector<std::vector<int64_t>> buckets)
      : buckets_(std::move(buckets)) {}

  absl::StatusOr<std::unique_ptr<TransferHandle>> StartCollective(Collective collective, int bucket,
                                                                  std::span<Tensor>) override {
    EXPECT_EQ(collective, Collective::kAllGather);
    started.push_back(bucket);
    return std::unique_ptr<TransferHandle>(std::make_unique<Handle>(*this, bucket));
  }
  const std::vector<std::vector<int64_t>>& buckets() const override { return buckets_; }

  std::vector<int> started;
  std::vector<int> waited;
  int failing = -1;

 private:
  class Handle final : public TransferHandle {
   public:
    Handle(GatherRecordingGroup& group, int bucket) : group_(group), bucket_(bucket) {}
    bool Done() override { return false; }
    absl::Status Wait(absl::Time) override {
      group_.waited.push_back(bucket_);
      if (bucket_ == group_.failing) return absl::DeadlineExceededError("no progress");
      return absl::OkStatus();
    }

   private:
    GatherRecordingGroup& group_;
    int bucket_;
  };
  std::vector<std::vector<int64_t>> buckets_;
};

TEST_F(GradientSyncTest, ParameterGatherStartsTheFirstLayersFirstAndWaitsBucketByBucket) {
  // One-byte buckets: fc3 is bucket 0, fc2 1, fc1 2, the buffers 3 (never gathered).
  GradientBuckets buckets = GradientBuckets::Plan(chunks_->refs(), 1);
  GatherRecordingGroup group(buckets.Layout());
  ParameterGather gather(buckets, group);
  const absl::Time deadline = absl::Now() + absl::Seconds(1);
  EXPECT_FALSE(gather.pending());
  ASSERT_TRUE(gather.WaitForLayer(0, 0, deadline).ok()) << "nothing pending";
  ASSERT_TRUE(gather.Start().ok());
  EXPECT_EQ(group.started, (std::vector<int>{2, 1, 0}));
  EXPECT_TRUE(gather.pending());
  EXPECT_EQ(gather.Start().code(), absl::StatusCode::kFailedPrecondition);
  // The forward's first layer (fc1) needs bucket 2 only; relu none; fc1 again nothing more.
  ASSERT_TRUE(gather.WaitForLayer(0, 0, deadline).ok());
  ASSERT_TRUE(gather.WaitForLayer(0, 1, deadline).ok());
  ASSERT_TRUE(gather.WaitForLayer(0, 0, deadline).ok());
  EXPECT_EQ(group.waited, (std::vector<int>{2}));
  ASSERT_TRUE(gather.WaitAll(deadline).ok());
  EXPECT_EQ(group.waited, (std::vector<int>{2, 1, 0}));
  EXPECT_FALSE(gather.pending());
  gather.TakeWaited();
  EXPECT_EQ(gather.TakeWaited(), absl::ZeroDuration()) << "taking the waits resets them";
  // The next update's gather; a wait that fails names its bucket.
  ASSERT_TRUE(gather.Start().ok());
  group.failing = 1;
  const absl::Status failed = gather.WaitAll(deadline);
  EXPECT_EQ(failed.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(std::string(failed.message()).find("all-gathering the parameters of gradient bucket 1"),
            std::string::npos)
      << failed;
}

}  // namespace
}  // namespace gpipe
