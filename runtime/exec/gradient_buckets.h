// GradientBuckets: how a stage's gradients are grouped for the all-reduce over its
// data-parallel replicas. Layers with parameters are taken in the order the backward finishes
// them (the last chunk's last layer first) and cut, at layer boundaries, into buckets of at
// least `bucket_bytes` (the last may be smaller). The layer buffers (batch-norm running
// statistics), if any, form one more bucket, the last, which the replicas average at the step's
// end. Every replica of a stage builds the same buckets from the same model and setting. Holds
// references to the chunks' tensors: the ParameterStores must outlive it.
#ifndef GPIPE_RUNTIME_EXEC_GRADIENT_BUCKETS_H_
#define GPIPE_RUNTIME_EXEC_GRADIENT_BUCKETS_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "runtime/core/tensor.h"
#include "runtime/exec/stage_chunks.h"

namespace gpipe {

// The one bucketing rule, shared with gpipe-plan show's prediction: `layer_bytes` are the
// gradient bytes of each layer in the order the backward finishes them (0: no parameters);
// returns each layer's bucket, or -1 for a layer of 0 bytes. A bucket closes once it holds at
// least `bucket_bytes`; the last may hold less.
std::vector<int> AssignBuckets(std::span<const int64_t> layer_bytes, int64_t bucket_bytes);

class GradientBuckets {
 public:
  struct Bucket {
    // The (chunk, local layer) pairs whose gradients it holds, in backward order; empty for the
    // buffers bucket.
    std::vector<std::pair<int, int>> layers;
    std::vector<Tensor> tensors;  // gradients (or buffers), layer by layer
    // The parameters of those gradients, in the same order (empty for the buffers bucket): what
    // the replicas all-gather after a sharded optimizer step.
    std::vector<Tensor> values;
    int64_t bytes = 0;
    bool buffers = false;
  };

  // `bucket_bytes` >= 1.
  static GradientBuckets Plan(std::span<const ChunkRefs> chunks, int64_t bucket_bytes);

  const std::vector<Bucket>& buckets() const { return buckets_; }
  std::vector<Bucket>& buckets() { return buckets_; }
  // Element counts per tensor, per bucket (what every replica agrees on at set-up).
  std::vector<std::vector<int64_t>> Layout() const;
  // The gradient bucket holding local layer `layer` of chunk `chunk`, or -1 (no parameters).
  int BucketOf(int chunk, int layer) const;
  int gradient_buckets() const { return gradient_buckets_; }

 private:
  std::vector<Bucket> buckets_;
  int gradient_buckets_ = 0;
  std::vector<std::vector<int>> bucket_of_;  // [chunk][layer]
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_GRADIENT_BUCKETS_H_
