// StageReduceGroups: the groups one rank sums tensors with, made once before the first step
// (never mid-step): with data parallelism its stage's gradient buckets and the group of the
// stage's replicas that all-reduces them, and one group per tie its replica shares between
// stages. Every member of a group makes it in the same order: the replica group first (replica
// groups are disjoint), then the tie groups in Setup.ties order. Beside each tie group it keeps
// the tie's members on this stage, resolved once by name to (chunk, parameter index) slots.
#ifndef GPIPE_RUNTIME_COORD_REDUCE_GROUPS_H_
#define GPIPE_RUNTIME_COORD_REDUCE_GROUPS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/control.pb.h"
#include "runtime/comm/data_channel.h"
#include "runtime/exec/executor_config.h"
#include "runtime/exec/gradient_buckets.h"
#include "runtime/exec/sharded_update.h"
#include "runtime/exec/stage_chunks.h"
#include "runtime/exec/tied_gradients.h"

namespace gpipe {

class StageReduceGroups {
 public:
  // `replica_group`: the ranks holding this stage in every replica (this one included); `ties`:
  // this replica's tie groups. `chunks` must outlive the result.
  static absl::StatusOr<StageReduceGroups> Make(DataChannel& channel, StageChunks& chunks, int rank,
                                                const std::vector<int>& replica_group,
                                                const std::vector<pb::TieGroup>& ties,
                                                int64_t gradient_bucket_bytes, absl::Time deadline);

  // Points the executor's resources at the groups (which must outlive it).
  void AttachTo(ExecutorResources& resources);
  // The all-gather of the parameters after a sharded optimizer step (null without replicas);
  // the evaluator's resources point at it too.
  ParameterGather* parameter_gather() const { return gather_.get(); }

 private:
  StageReduceGroups() = default;
  std::unique_ptr<GradientBuckets> buckets_;        // with replicas only; stable address
  std::unique_ptr<ReduceGroup> replicas_;           // null without buckets
  std::unique_ptr<ParameterGather> gather_;         // with the replica group
  std::vector<std::unique_ptr<ReduceGroup>> ties_;  // per tie; null where not a member
  std::vector<TiedGradientSum> tied_;               // per tie with members here, in tie order
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_REDUCE_GROUPS_H_
