// Which checkpoints and files a commit leaves in a checkpoint directory. It assumes the caller
// owns the directory (CheckpointDirLock, checkpoint_lock.h) and writes one checkpoint at a time:
// then any incomplete step directory but the one being committed, and any temporary file older
// than the commit, is a crash's leftover and safe to remove.
#ifndef GPIPE_RUNTIME_CKPT_CHECKPOINT_RETENTION_H_
#define GPIPE_RUNTIME_CKPT_CHECKPOINT_RETENTION_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gpipe {

struct CheckpointRetention {
  // Complete checkpoints kept, the newest ones (0: all). Which count, see this_runs_steps.
  int keep_last = 0;
  // Unset (a fresh or resumed run continuing the directory's series): the complete checkpoints up
  // to the one committed count toward keep_last; newer complete ones (left by a run that went
  // further before this one resumed from an earlier step) are left alone.
  // Set (a run that started over): the steps this run committed checkpoints at (the one being
  // committed may be left out). Every complete checkpoint at another step, older or newer, is an
  // earlier run's and is removed, once this run's own checkpoint is complete and `latest` names
  // it; keep_last counts this run's only. The caller keeps the set (rank 0 knows its saves): a
  // step number alone cannot tell this run's step-5 from an earlier run's step-100.
  std::optional<std::set<int64_t>> this_runs_steps;
};

// After checkpoint `newest_step` under `dir` is complete and `latest` names it: removes the
// complete checkpoints `retention` does not keep, every incomplete step directory other than
// `newest_step`'s, and the temporaries (NAME.tmp.XXXXXX, see kTemporaryInfix) last modified
// before `save_began`: `latest`'s in `dir`, the manifest's and shards' in kept checkpoints.
// Returns the paths removed. DATA_LOSS naming the path when a removal fails; FAILED_PRECONDITION
// when `dir` cannot be listed.
absl::StatusOr<std::vector<std::string>> PruneCheckpoints(const std::string& dir,
                                                          int64_t newest_step,
                                                          const CheckpointRetention& retention,
                                                          absl::Time save_began);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_CHECKPOINT_RETENTION_H_
