#include "runtime/comm/mpi_group_setup.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/mpi_status.h"
#include "runtime/comm/transfer_header.h"
#include "runtime/comm/wait.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

constexpr int64_t kAgreementMagic = 0x6770697065415202;  // "gpipeAR" + version 2

// What one member is about to reduce.
struct Agreement {
  int64_t magic = kAgreementMagic;
  int64_t group_hash = 0;
  int64_t group_size = 0;
  int64_t tensor_count = 0;
  int64_t total_elements = 0;
  int64_t shapes_hash = 0;
  int64_t bucket_count = 0;
};
using AgreementWords = std::array<int64_t, 7>;

uint64_t Fnv1a(uint64_t hash, int64_t word) {
  for (int i = 0; i < 8; ++i) {
    hash ^= (static_cast<uint64_t>(word) >> (8 * i)) & 0xff;
    hash *= 1099511628211ull;
  }
  return hash;
}

AgreementWords ToWords(const Agreement& a) {
  return {a.magic,          a.group_hash,  a.group_size,  a.tensor_count,
          a.total_elements, a.shapes_hash, a.bucket_count};
}

Agreement FromWords(const AgreementWords& w) {
  return Agreement{w[0], w[1], w[2], w[3], w[4], w[5], w[6]};
}

Agreement Summarize(const std::vector<std::vector<int64_t>>& buckets,
                    const std::vector<int>& group) {
  Agreement agreement;
  uint64_t group_hash = 14695981039346656037ull;
  for (int rank : group) group_hash = Fnv1a(group_hash, rank);
  uint64_t shapes_hash = 14695981039346656037ull;
  for (const std::vector<int64_t>& bucket : buckets) {
    for (int64_t count : bucket) {
      shapes_hash = Fnv1a(shapes_hash, count);
      agreement.total_elements += count;
    }
    agreement.tensor_count += static_cast<int64_t>(bucket.size());
    shapes_hash = Fnv1a(shapes_hash, -1);  // the bucket's end
  }
  agreement.group_hash = static_cast<int64_t>(group_hash);
  agreement.group_size = static_cast<int64_t>(group.size());
  agreement.shapes_hash = static_cast<int64_t>(shapes_hash);
  agreement.bucket_count = static_cast<int64_t>(buckets.size());
  return agreement;
}

std::string Counts(const Agreement& a) {
  return absl::StrCat(
      a.tensor_count, a.tensor_count == 1 ? " tensor (" : " tensors (", a.total_elements, " floats",
      a.bucket_count > 1 ? absl::StrCat(" in ", a.bucket_count, " buckets") : "", ")");
}

}  // namespace

absl::Status MpiGroupSetup::CheckGroup(const std::vector<int>& group,
                                       const std::string& description) const {
  if (std::adjacent_find(group.begin(), group.end()) != group.end()) {
    return absl::InvalidArgumentError(absl::StrCat(description, ": a rank appears twice"));
  }
  if (group.empty() || group.front() < 0 || group.back() >= context_->size) {
    return absl::InvalidArgumentError(
        absl::StrCat(description, ": the job has ranks 0..", context_->size - 1));
  }
  if (!std::binary_search(group.begin(), group.end(), context_->rank)) {
    return absl::InvalidArgumentError(absl::StrCat(description, ": this rank is not in the group"));
  }
  return absl::OkStatus();
}

absl::Status MpiGroupSetup::CheckAgreement(const std::vector<std::vector<int64_t>>& buckets,
                                           const std::vector<int>& group, absl::Time deadline,
                                           const std::string& description) {
  DataChannelContext& context = *context_;
  const Agreement mine = Summarize(buckets, group);
  struct Exchange {
    AgreementWords mine;
    std::vector<AgreementWords> theirs;
  };
  auto exchange = std::make_shared<Exchange>();
  exchange->mine = ToWords(mine);
  exchange->theirs.resize(group.size());
  const int tag = GroupTag(MessageClass::kGroupCheck);
  // requests[2i] receives from group[i], requests[2i + 1] sends to it.
  std::vector<MPI_Request> requests(2 * group.size(), MPI_REQUEST_NULL);
  absl::Status status;
  for (size_t i = 0; i < group.size() && status.ok(); ++i) {
    if (group[i] == context.rank) continue;
    status = MpiStatus(MPI_Irecv(exchange->theirs[i].data(), sizeof(AgreementWords), MPI_BYTE,
                                 group[i], tag, context.comm, &requests[2 * i]),
                       "MPI_Irecv");
    if (status.ok()) {
      status = MpiStatus(MPI_Isend(exchange->mine.data(), sizeof(AgreementWords), MPI_BYTE,
                                   group[i], tag, context.comm, &requests[2 * i + 1]),
                         "MPI_Isend");
    }
  }
  if (status.ok()) {
    status = WaitForRequests(requests, {}, deadline, context.abort_poller, context.clock(), [&] {
      std::vector<int> missing;
      for (size_t i = 0; i < group.size(); ++i) {
        if (requests[2 * i] != MPI_REQUEST_NULL) missing.push_back(group[i]);
      }
      return absl::StrCat(description, "; ranks [", absl::StrJoin(missing, ", "),
                          "] have not joined");
    });
  }
  if (!status.ok()) {
    context.Abandon(requests, exchange);
    if (!absl::IsDeadlineExceeded(status) && !absl::IsAborted(status)) {
      status = WithContext(status, description);
    }
    return status;
  }
  const std::string self = absl::StrCat("rank ", context.rank, " all-reduces ", Counts(mine),
                                        " over ranks [", absl::StrJoin(group, ", "), "]");
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i] == context.rank) continue;
    const Agreement theirs = FromWords(exchange->theirs[i]);
    if (theirs.magic != kAgreementMagic) {
      return absl::DataLossError(absl::StrCat(self, " but rank ", group[i],
                                              " sent something that is not an all-reduce "
                                              "description (another gpipe version?)"));
    }
    if (theirs.group_hash != mine.group_hash || theirs.group_size != mine.group_size) {
      return absl::InvalidArgumentError(absl::StrCat(self, " but rank ", group[i], " all-reduces ",
                                                     Counts(theirs), " over another group of ",
                                                     theirs.group_size, " ranks"));
    }
    if (theirs.tensor_count != mine.tensor_count || theirs.total_elements != mine.total_elements) {
      return absl::InvalidArgumentError(
          absl::StrCat(self, " but rank ", group[i], " all-reduces ", Counts(theirs)));
    }
    if (theirs.bucket_count != mine.bucket_count) {
      return absl::InvalidArgumentError(
          absl::StrCat(self, " but rank ", group[i], " all-reduces ", Counts(theirs)));
    }
    if (theirs.shapes_hash != mine.shapes_hash) {
      return absl::InvalidArgumentError(absl::StrCat(
          self, " but rank ", group[i], " all-reduces tensors of other sizes with the same total"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<MPI_Comm> MpiGroupSetup::CreateCommunicator(const std::vector<int>& group) {
  MPI_Comm parent = context_->comm;
  MPI_Group parent_group = MPI_GROUP_NULL;
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_group(parent, &parent_group), "MPI_Comm_group"));
  MPI_Group members = MPI_GROUP_NULL;
  absl::Status status = MpiStatus(
      MPI_Group_incl(parent_group, static_cast<int>(group.size()), group.data(), &members),
      "MPI_Group_incl");
  MPI_Comm comm = MPI_COMM_NULL;
  if (status.ok()) {
    // Every member has passed CheckAgreement, so all of them are here: this cannot hang.
    status = MpiStatus(
        MPI_Comm_create_group(parent, members, GroupTag(MessageClass::kGroupCreate), &comm),
        "MPI_Comm_create_group");
  }
  if (members != MPI_GROUP_NULL) MPI_Group_free(&members);
  MPI_Group_free(&parent_group);
  if (status.ok()) {
    status = MpiStatus(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    if (!status.ok()) FreeCommunicator(comm);
  }
  if (!status.ok()) {
    return WithContext(status, absl::StrCat("creating the communicator of ranks [",
                                            absl::StrJoin(group, ", "), "]"));
  }
  return comm;
}

}  // namespace gpipe
