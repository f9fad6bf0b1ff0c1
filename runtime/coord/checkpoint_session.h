// CheckpointSession: one rank's part in saving and restoring checkpoints (where they sit in the
// step protocol: coord/worker.cc). Saving, at a checkpoint command between steps: replica 0's
// ranks each write their stage's shard (every replica holds the same values), every rank reports
// to rank 0, which writes the manifest and points `latest` at it (checkpoint_writer.h), and every
// rank learns the outcome, so all continue or all fail alike. Restoring, before the first step:
// every rank reads the tensors its stage holds, by name, from whichever shards have them, and
// rank 0 checks that together they took every tensor of the checkpoint.
#ifndef GPIPE_RUNTIME_COORD_CHECKPOINT_SESSION_H_
#define GPIPE_RUNTIME_COORD_CHECKPOINT_SESSION_H_

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/control.pb.h"
#include "runtime/comm/control_channel.h"
#include "runtime/core/logger.h"
#include "runtime/exec/stage_chunks.h"

namespace gpipe {

// What rank 0 records beside the tensors.
struct CheckpointProgress {
  int64_t applied_steps = 0;     // optimizer updates so far
  int64_t skipped_in_a_row = 0;  // skipped steps at the end
  int64_t dataset_size = 0;      // the training split's samples
};

class CheckpointSession {
 public:
  // `setup`: this rank's; the plan's checkpoint.dir is absolute there. All must outlive this.
  CheckpointSession(ControlChannel& control, const pb::Setup& setup, absl::Duration timeout,
                    const Logger& logger)
      : control_(control), setup_(setup), timeout_(timeout), logger_(logger) {}

  // Rank 0, before it sends the checkpoint command for `step` steps done: creates the (empty)
  // checkpoint directory.
  absl::Status Prepare(int64_t step);
  // Every rank, at the checkpoint command for `step` steps done. `progress` matters on rank 0.
  // Every rank returns the same error when any part failed (naming the rank and file).
  absl::Status Save(int64_t step, const StageChunks& parts, const CheckpointProgress& progress);

  // Every rank, before the first step of a resumed run (Setup.resume): restores this stage's
  // parameters, buffers and optimizer state. Rank 0 also checks `dataset_size` (its training
  // split's) against the checkpoint's. Every rank returns the same error when any part failed.
  absl::Status Restore(StageChunks& parts, int64_t dataset_size);

  // The directory of the checkpoint after `step` steps (checkpoint.dir/step-NNNNNNNNN).
  std::string CheckpointPath(int64_t step) const;

 private:
  // Rank 0: the manifest of `step` from every rank's report; errors name the rank.
  absl::StatusOr<pb::CheckpointManifest> BuildManifest(int64_t step,
                                                       const CheckpointProgress& progress,
                                                       const std::vector<std::string>& gathered);
  // Rank 0 broadcasts its `outcome` (on `tag`); every rank returns it, the others as ABORTED
  // (rank 0 reports the failure; they stop with it without announcing it again).
  absl::Status Conclude(const absl::Status& outcome, int tag, absl::string_view what);

  ControlChannel& control_;
  const pb::Setup& setup_;
  // Rank 0: the steps this run has committed checkpoints at (a run that started over removes
  // every other one: CheckpointRetention).
  std::set<int64_t> saved_steps_;
  absl::Duration timeout_;
  const Logger& logger_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_CHECKPOINT_SESSION_H_
