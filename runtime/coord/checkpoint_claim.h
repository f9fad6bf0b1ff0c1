// Rank 0's start-up claim of checkpoint.dir: the directory is this job's for its life (its lock),
// usable as a save will use it (`latest` a regular file or absent, a probe that does what a save
// does), and a run that would rewrite its `latest` and prune its checkpoints does so only when
// it continues the directory's own series (--resume from a checkpoint in it) or was told to
// start over. No MPI.
#ifndef GPIPE_RUNTIME_COORD_CHECKPOINT_CLAIM_H_
#define GPIPE_RUNTIME_COORD_CHECKPOINT_CLAIM_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/control.pb.h"
#include "runtime/ckpt/checkpoint_lock.h"

namespace gpipe {

// Takes `dir`'s CheckpointDirLock (creating `dir` with its parents), then checks its `latest`
// and probes it (checkpoint_probe.h). FAILED_PRECONDITION naming the directory and, when another
// job holds it, that job.
absl::StatusOr<CheckpointDirLock> LockCheckpointDirectory(const std::string& dir);

// With the lock held: OK when the run starts over, resumes from a checkpoint inside `dir`, or
// `dir` holds no checkpoint with a manifest. Otherwise FAILED_PRECONDITION naming the newest
// such checkpoint (or the one whose manifest cannot be read, with why) and the ways on.
absl::Status CheckNoTakeover(const std::string& dir, const std::optional<pb::ResumeFrom>& resume,
                             bool start_over);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_CHECKPOINT_CLAIM_H_
