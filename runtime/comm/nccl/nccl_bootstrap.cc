#include "runtime/comm/nccl/nccl_bootstrap.h"

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <span>

#include "absl/strings/str_cat.h"
#include "runtime/comm/mpi_status.h"
#include "runtime/comm/nccl/nccl_status.h"
#include "runtime/comm/transfer_header.h"
#include "runtime/comm/wait.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// Longer placements are cut (host names beyond this are not worth a bigger message).
constexpr int kPlacementBytes = 320;

}  // namespace

absl::StatusOr<ncclUniqueId> ShareUniqueId(DataChannelContext& context,
                                           const std::vector<int>& members, absl::Time deadline,
                                           const std::string& description) {
  auto id_buffer = std::make_shared<ncclUniqueId>();
  ncclUniqueId& id = *id_buffer;
  std::memset(&id, 0, sizeof(id));
  const int tag = GroupTag(MessageClass::kGroupCreate);
  std::vector<MPI_Request> requests;
  if (members.front() == context.rank) {
    RETURN_IF_ERROR(WithContext(NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"), description));
    for (size_t i = 1; i < members.size(); ++i) {
      MPI_Request& request = requests.emplace_back(MPI_REQUEST_NULL);
      RETURN_IF_ERROR(WithContext(
          MpiStatus(MPI_Isend(&id, sizeof(id), MPI_BYTE, members[i], tag, context.comm, &request),
                    "MPI_Isend"),
          description));
    }
  } else {
    MPI_Request& request = requests.emplace_back(MPI_REQUEST_NULL);
    RETURN_IF_ERROR(WithContext(MpiStatus(MPI_Irecv(&id, sizeof(id), MPI_BYTE, members.front(), tag,
                                                    context.comm, &request),
                                          "MPI_Irecv"),
                                description));
  }
  const absl::Status status =
      WaitForRequests(requests, {}, deadline, context.abort_poller, context.clock(), [&] {
        return absl::StrCat(description, ": waiting for rank ",
                            members.front() == context.rank ? members.back() : members.front(),
                            " to exchange the NCCL communicator's id");
      });
  if (!status.ok()) {
    // What the cancellation left active keeps the id's memory until MPI lets go of it.
    context.Abandon(requests, id_buffer);
    return status;
  }
  return id;
}

absl::StatusOr<std::vector<std::string>> GatherPlacements(DataChannelContext& context,
                                                          const std::string& placement,
                                                          absl::Time deadline) {
  struct Buffers {
    std::vector<char> mine;
    std::vector<char> all;
  };
  auto buffers = std::make_shared<Buffers>();
  buffers->mine.assign(kPlacementBytes, '\0');
  std::copy_n(placement.begin(), std::min<size_t>(placement.size(), kPlacementBytes - 1),
              buffers->mine.begin());
  buffers->all.assign(static_cast<size_t>(kPlacementBytes) * context.size, '\0');
  const std::vector<char>& all = buffers->all;
  MPI_Request request = MPI_REQUEST_NULL;
  RETURN_IF_ERROR(
      MpiStatus(MPI_Iallgather(buffers->mine.data(), kPlacementBytes, MPI_CHAR, buffers->all.data(),
                               kPlacementBytes, MPI_CHAR, context.comm, &request),
                "MPI_Iallgather"));
  std::span<MPI_Request> requests(&request, 1);
  const absl::Status status = WaitForRequests(
      requests, {}, deadline, context.abort_poller, context.clock(),
      [&] { return absl::StrCat("rank ", context.rank, " gathering every rank's GPU"); },
      /*cancel_on_failure=*/false);
  if (!status.ok()) {
    context.Abandon(requests, buffers, /*collective=*/true);
    return status;
  }
  std::vector<std::string> placements;
  for (int rank = 0; rank < context.size; ++rank) {
    const char* begin = all.data() + static_cast<size_t>(rank) * kPlacementBytes;
    placements.emplace_back(begin, strnlen(begin, kPlacementBytes));
  }
  return placements;
}

}  // namespace gpipe
