// The executor's side of training.shard_optimizer_state (ZeRO stage 1): after the replicas'
// reduce-scatter each holds the summed gradients of the parts it owns (ShardRange) only, so the
// non-finite check reads those parts, the chunks' ShardedOptimizers update them, and the
// replicas then all-gather the updated parameters, bucket by bucket, so that every replica
// enters the next forward with the whole update.
#ifndef GPIPE_RUNTIME_EXEC_SHARDED_UPDATE_H_
#define GPIPE_RUNTIME_EXEC_SHARDED_UPDATE_H_

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

// Starts the all-gather of every gradient bucket's parameters over `group`, in bucket order, and
// waits for all of them until `deadline`. Errors name the bucket.
absl::Status AllGatherParameters(GradientBuckets& buckets, ReduceGroup& group, absl::Time deadline);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_SHARDED_UPDATE_H_
