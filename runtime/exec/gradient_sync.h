// GradientSync: one training step's all-reduce of a stage's gradients over its data-parallel
// replicas. The executor reports each layer's gradient accumulation; once a layer has
// accumulated every micro-batch of the step its gradients are final, and once every layer of a
// bucket is final (and every earlier bucket has started: buckets start in order on every
// replica) the bucket's all-reduce starts, overlapping the rest of the backward. At the step's
// AllReduceGrads, Finish starts what is left (the buffers bucket, which is then divided by the
// replica count: the running statistics are averaged), waits for everything and leaves the sums
// in the gradients. Under training.shard_optimizer_state the gradient buckets are
// reduce-scattered instead: each replica is left with the sums of the parts it owns (the buffers
// bucket is still all-reduced and averaged). Records each bucket's span in the trace. Lives for
// one step; single-threaded.
#ifndef GPIPE_RUNTIME_EXEC_GRADIENT_SYNC_H_
#define GPIPE_RUNTIME_EXEC_GRADIENT_SYNC_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/control.pb.h"
#include "runtime/comm/data_channel.h"
#include "runtime/device/device.h"
#include "runtime/exec/gradient_buckets.h"
#include "runtime/exec/step_scope.h"

namespace gpipe {

class GradientSync {
 public:
  // All references must outlive the object; `micro_batches`, `replicas` >= 1. `reduction`:
  // kAllReduce, or kReduceScatter for a sharded optimizer state.
  GradientSync(GradientBuckets& buckets, ReduceGroup& group, Device& device, const StepScope& scope,
               int micro_batches, int replicas, Collective reduction = Collective::kAllReduce);
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Layer `layer` of chunk `chunk` added one micro-batch's parameter gradients. FAILED_PRECONDITION
  // when it does so more often than there are micro-batches, or after Finish.
  absl::Status Accumulated(int chunk, int layer);
  // Tests the reductions in flight (MPI progresses them when tested) and starts the buckets that
  // became ready.
  absl::Status Poll();
  // Starts every bucket not started yet, waits for all until `deadline` and averages the buffers.
  absl::Status Finish(absl::Time deadline);

  // Into the step's report: buckets reduced, wall time from the first start to the last
  // completion, and the part of it Finish waited.
  void Report(pb::StepReport& report) const;

 private:
  struct InFlight {
    int bucket = 0;
    std::unique_ptr<TransferHandle> handle;
    int64_t started_ns = 0;  // trace clock
  };
  absl::Status StartReady(bool all);
  void Completed(const InFlight& done, absl::Time at);

  GradientBuckets& buckets_;
  ReduceGroup& group_;
  Device& device_;
  const StepScope& scope_;
  const int micro_batches_;
  const int replicas_;
  const Collective reduction_;
  std::vector<std::vector<int>> accumulated_;  // [chunk][layer]
  std::vector<int> pending_layers_;            // per gradient bucket: layers not yet final
  int next_ = 0;                               // the next bucket to start
  std::vector<InFlight> in_flight_;
  bool finished_ = false;
  absl::Time first_start_ = absl::InfiniteFuture();
  absl::Time last_done_ = absl::InfinitePast();
  absl::Duration exposed_ = absl::ZeroDuration();
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_GRADIENT_SYNC_H_
