// OrphanedRequests: MPI requests nobody waits for any more (their wait failed, or their handle
// was destroyed early) that MPI may still complete, each with whatever keeps its buffer alive.
// Reap() releases the ones that finished. The destructor frees the rest (MPI_Request_free; MPI
// forbids it for non-blocking collectives, which are left as they are) and deliberately never
// releases their buffers: MPI may still read or write them, and this only happens on the way to
// a failed exit. Not thread-safe (owned by one channel).
#ifndef GPIPE_RUNTIME_COMM_ORPHANED_REQUESTS_H_
#define GPIPE_RUNTIME_COMM_ORPHANED_REQUESTS_H_

#include <mpi.h>

#include <memory>
#include <span>
#include <vector>

namespace gpipe {

class OrphanedRequests {
 public:
  OrphanedRequests() = default;
  OrphanedRequests(const OrphanedRequests&) = delete;
  OrphanedRequests& operator=(const OrphanedRequests&) = delete;
  ~OrphanedRequests();

  // Takes the active requests out of `requests` (leaving MPI_REQUEST_NULL behind); `keep_alive`
  // is held until all of them finish. A span with no active request adopts nothing.
  // `collective`: the requests belong to non-blocking collectives.
  void Adopt(std::span<MPI_Request> requests, std::shared_ptr<const void> keep_alive,
             bool collective = false);
  // Tests the adopted requests once and releases the buffers of those that finished.
  void Reap();
  // Requests still active.
  int size() const;

 private:
  struct Orphan {
    std::vector<MPI_Request> requests;
    std::shared_ptr<const void> keep_alive;
    bool collective = false;
  };
  std::vector<Orphan> orphans_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_ORPHANED_REQUESTS_H_
