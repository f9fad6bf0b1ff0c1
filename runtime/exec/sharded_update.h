// The executor's side of training.shard_optimizer_state (ZeRO stage 1): after the replicas'
// reduce-scatter each holds the summed gradients of the parts it owns (ShardRange) only, so the
// non-finite check reads those parts, the chunks' ShardedOptimizers update them, and the
// replicas then all-gather the updated parameters, bucket by bucket (ParameterGather), so that
// every replica's next forward reads the whole update.
#ifndef GPIPE_RUNTIME_EXEC_SHARDED_UPDATE_H_
#define GPIPE_RUNTIME_EXEC_SHARDED_UPDATE_H_

#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/comm/data_channel.h"
#include "runtime/core/tensor.h"
#include "runtime/exec/gradient_buckets.h"
#include "runtime/exec/stage_chunks.h"

namespace gpipe {

// Views of the part replica `replica` of `replicas` owns of every gradient of `chunks`, chunk
// by chunk in parameter order (empty parts left out).
absl::StatusOr<std::vector<Tensor>> OwnedGradientParts(std::span<const ChunkRefs> chunks,
                                                       int replica, int replicas);

// ParameterGather: the all-gather of the updated parameters, started by the optimizer step and
// waited for where the parameters are read next: bucket by bucket before the first forward of a
// layer in it (StageCompute), so the gathers overlap the next step's start (the step command's
// round trip, loading or receiving the first micro-batch, the forward of the layers before); and
// whole before an evaluation's step, the next update, a checkpoint, an export or the end of the
// job. Buckets are cut from the last layers, so they are started in descending order (the first
// layers' first: what the forward needs first). One per stage, shared by the training and
// evaluation executors; the buckets and the group must outlive it. Single-threaded.
class ParameterGather {
 public:
  ParameterGather(GradientBuckets& buckets, ReduceGroup& group)
      : buckets_(buckets), group_(group) {}
  ParameterGather(const ParameterGather&) = delete;
  ParameterGather& operator=(const ParameterGather&) = delete;

  // Starts the all-gather of every gradient bucket's parameters. FAILED_PRECONDITION when the
  // previous one was not waited for; errors name the bucket.
  absl::Status Start();
  // Waits until `deadline` for the bucket holding local layer `layer` of chunk `chunk` (nothing
  // when it has no parameters or no gather is pending).
  absl::Status WaitForLayer(int chunk, int layer, absl::Time deadline);
  // Waits for every bucket still gathering.
  absl::Status WaitAll(absl::Time deadline);
  bool pending() const;
  // The time spent waiting since the last call (a step's report carries it).
  absl::Duration TakeWaited();

 private:
  absl::Status WaitForBucket(int bucket, absl::Time deadline);

  GradientBuckets& buckets_;
  ReduceGroup& group_;
  std::vector<std::unique_ptr<TransferHandle>> handles_;  // by bucket; null once waited for
  absl::Duration waited_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_SHARDED_UPDATE_H_
