// CheckpointDirLock: one job owns a checkpoint directory for its life, so that two jobs never
// save into (and prune) the same one. It is an advisory flock(2) on DIR/lock, held through an
// open descriptor: the kernel releases it when the descriptor is closed or the process dies
// (kill -9 included), so it is never left stale; the file itself stays and is harmless. While
// held, the file holds one line describing the holder, which a refused job quotes:
//   host=node7 pid=1234 started=2026-11-27T06:55:01Z
// On a local file system flock locks belong to an open file description: a second Acquire in the
// same process conflicts with the first like another process's would.
// Network file systems: on Linux (since 2.6.12) flock on NFS is emulated with POSIX byte-range
// locks, so it excludes jobs on other NFS clients too, given NFSv4 or lockd (NFSv3); the POSIX
// emulation belongs to the process, so there two Acquires in one process do not exclude each
// other. A mount with `nolock` or `local_lock=flock|all` keeps locks on the client: flock
// succeeds and excludes only jobs on the same node, which gpipe cannot detect (say so to users:
// docs/checkpoints.md). Where the file system refuses locks (ENOLCK, EOPNOTSUPP: some FUSE or Lustre mount
// options) Acquire fails saying the check could not be made, rather than going on unprotected.
// Not thread-safe; movable, not copyable.
#ifndef GPIPE_RUNTIME_CKPT_CHECKPOINT_LOCK_H_
#define GPIPE_RUNTIME_CKPT_CHECKPOINT_LOCK_H_

#include <string>

#include "absl/status/statusor.h"

namespace gpipe {

class CheckpointDirLock {
 public:
  // Creates `dir` when missing (with its parents, like mkdir -p), opens or creates
  // `dir`/lock (kCheckpointLockFile), locks it without waiting and writes this process's line
  // into it (fsynced). FAILED_PRECONDITION: "checkpoint.dir <dir> is in use by another job
  // (<holder's line, or holder unknown>): ..." when held elsewhere; naming the file system's
  // lack of lock support; or naming the path and the failing step (create, open, write).
  static absl::StatusOr<CheckpointDirLock> Acquire(const std::string& dir);

  CheckpointDirLock(CheckpointDirLock&& other) noexcept;
  CheckpointDirLock& operator=(CheckpointDirLock&& other) noexcept;
  CheckpointDirLock(const CheckpointDirLock&) = delete;
  CheckpointDirLock& operator=(const CheckpointDirLock&) = delete;
  // Releases the lock (closes the descriptor).
  ~CheckpointDirLock();

  // The lock file's path and the line written there.
  const std::string& path() const { return path_; }
  const std::string& holder() const { return holder_; }

 private:
  CheckpointDirLock(int fd, std::string path, std::string holder)
      : fd_(fd), path_(std::move(path)), holder_(std::move(holder)) {}
  void Release();

  int fd_ = -1;
  std::string path_;
  std::string holder_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_CHECKPOINT_LOCK_H_
