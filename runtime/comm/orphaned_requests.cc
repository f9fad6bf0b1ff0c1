#include "runtime/comm/orphaned_requests.h"

#include <algorithm>
#include <utility>

namespace gpipe {
namespace {

bool AllNull(const std::vector<MPI_Request>& requests) {
  return std::all_of(requests.begin(), requests.end(),
                     [](MPI_Request r) { return r == MPI_REQUEST_NULL; });
}

}  // namespace

void OrphanedRequests::Adopt(std::span<MPI_Request> requests,
                             std::shared_ptr<const void> keep_alive, bool collective) {
  Orphan orphan;
  orphan.collective = collective;
  for (MPI_Request& request : requests) {
    if (request == MPI_REQUEST_NULL) continue;
    orphan.requests.push_back(request);
    request = MPI_REQUEST_NULL;
  }
  if (orphan.requests.empty()) return;
  orphan.keep_alive = std::move(keep_alive);
  orphans_.push_back(std::move(orphan));
}

void OrphanedRequests::Reap() {
  for (Orphan& orphan : orphans_) {
    for (MPI_Request& request : orphan.requests) {
      if (request == MPI_REQUEST_NULL) continue;
      int done = 0;
      if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) request = MPI_REQUEST_NULL;
    }
  }
  std::erase_if(orphans_, [](const Orphan& orphan) { return AllNull(orphan.requests); });
}

int OrphanedRequests::size() const {
  int active = 0;
  for (const Orphan& orphan : orphans_) {
    active += static_cast<int>(std::count_if(orphan.requests.begin(), orphan.requests.end(),
                                             [](MPI_Request r) { return r != MPI_REQUEST_NULL; }));
  }
  return active;
}

OrphanedRequests::~OrphanedRequests() {
  int finalized = 1;
  const bool mpi_running = MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized;
  if (mpi_running) Reap();
  for (Orphan& orphan : orphans_) {
    if (mpi_running && !orphan.collective) {
      for (MPI_Request& request : orphan.requests) {
        if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
      }
    }
    // Intentionally leaked: MPI may still touch this buffer after the request was freed.
    new std::shared_ptr<const void>(std::move(orphan.keep_alive));
  }
}

}  // namespace gpipe
