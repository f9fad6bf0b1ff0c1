#include "runtime/comm/control_channel.h"

#include <climits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/control_frame.h"
#include "runtime/comm/mpi_status.h"
#include "runtime/comm/wait.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// Abort messages stay small so MPI sends them eagerly (no handshake with a possibly dead peer).
constexpr size_t kMaxAbortMessageBytes = 1000;
// How long NotifyAbort waits for its sends, and PollAbort for an abort message's bytes.
constexpr absl::Duration kControlTagAbortDeliveryTimeout = absl::Seconds(1);

// Adds `context` to errors other than deadline and abort, whose messages already say it all.
absl::Status InContext(const absl::Status& status, const std::string& context) {
  if (status.ok() || absl::IsDeadlineExceeded(status) || absl::IsAborted(status)) return status;
  return WithContext(status, context);
}

}  // namespace

std::string ControlTagName(int tag) {
  switch (tag) {
    case kControlTagSetup:
      return "setup";
    case kControlTagStepCommand:
      return "step command";
    case kControlTagStepReport:
      return "step report";
    case kControlTagDecision:
      return "step decision";
    case kControlTagExport:
      return "export";
    case kControlTagAbort:
      return "abort";
    case kControlTagBroadcast:
      return "broadcast";
    case kControlTagGather:
      return "gather";
    case kControlTagClock:
      return "clock probe";
    case kControlTagTrace:
      return "trace";
    case kControlTagCheckpoint:
      return "checkpoint";
    case kControlTagResume:
      return "resume";
    default:
      return absl::StrCat("tag ", tag);
  }
}

absl::StatusOr<std::unique_ptr<ControlChannel>> ControlChannel::Create(
    MPI_Comm world, const Clock* clock, absl::Duration setup_timeout) {
  RealClock real_clock;
  const Clock& time = clock != nullptr ? *clock : real_clock;
  ASSIGN_OR_RETURN(PrivateCommunicator private_comm,
                   CreatePrivateCommunicator(world, time.Now() + setup_timeout, AbortPoller(), time,
                                             "control channel"));
  return std::unique_ptr<ControlChannel>(new ControlChannel(private_comm.comm, private_comm.rank,
                                                            private_comm.size,
                                                            private_comm.tag_upper_bound, clock));
}

ControlChannel::ControlChannel(MPI_Comm comm, int rank, int size, int tag_ub, const Clock* clock)
    : comm_(comm), rank_(rank), size_(size), tag_ub_(tag_ub), clock_(clock) {}

ControlChannel::~ControlChannel() { FreeCommunicator(comm_); }

absl::Status ControlChannel::CheckPeerAndTag(int peer, int tag) const {
  if (peer < 0 || peer >= size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", peer, " is not in the job (ranks 0..", size_ - 1, ")"));
  }
  if (tag == kControlTagAbort) {
    return absl::InvalidArgumentError("the abort tag is reserved for NotifyAbort");
  }
  if (tag < 0 || tag > tag_ub_) {
    return absl::InvalidArgumentError(
        absl::StrCat("control tag ", tag, " is outside 0..", tag_ub_));
  }
  return absl::OkStatus();
}

void ControlChannel::Abandon(std::span<MPI_Request> requests, std::shared_ptr<const void> buffer) {
  CancelRequests(requests, clock(), kCancelGrace);
  orphans_.Adopt(requests, std::move(buffer));
}

absl::Status ControlChannel::Send(int peer, int tag, const google::protobuf::MessageLite& message,
                                  absl::Time deadline) {
  orphans_.Reap();
  const std::string context = absl::StrCat("rank ", rank_, " sending ", message.GetTypeName(),
                                           " to rank ", peer, " (", ControlTagName(tag), ")");
  RETURN_IF_ERROR(WithContext(CheckPeerAndTag(peer, tag), context));
  ASSIGN_OR_RETURN(std::string frame, EncodeFrame(message));
  if (frame.size() > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": ", frame.size(), " bytes is more than one MPI message holds"));
  }
  auto buffer = std::make_shared<const std::string>(std::move(frame));
  MPI_Request request = MPI_REQUEST_NULL;
  RETURN_IF_ERROR(WithContext(MpiStatus(MPI_Isend(buffer->data(), static_cast<int>(buffer->size()),
                                                  MPI_BYTE, peer, tag, comm_, &request),
                                        "MPI_Isend"),
                              context));
  std::span<MPI_Request> requests(&request, 1);
  const absl::Status status = WaitForRequests(
      requests, {}, deadline, [this] { return PollAbort(); }, clock(), [&] { return context; });
  if (!status.ok()) orphans_.Adopt(requests, buffer);
  return InContext(status, context);
}

absl::Status ControlChannel::Recv(int peer, int tag, google::protobuf::MessageLite& message,
                                  absl::Time deadline) {
  orphans_.Reap();
  const std::string context = absl::StrCat("rank ", rank_, " receiving ", message.GetTypeName(),
                                           " from rank ", peer, " (", ControlTagName(tag), ")");
  RETURN_IF_ERROR(WithContext(CheckPeerAndTag(peer, tag), context));
  auto buffer = std::make_shared<std::string>();
  MPI_Request request = MPI_REQUEST_NULL;
  bool matched = false;
  std::span<MPI_Request> requests(&request, 1);
  const absl::Status status = PollUntil(
      [&]() -> absl::StatusOr<bool> {
        if (!matched) {
          int found = 0;
          MPI_Message probed;
          MPI_Status probe_status;
          RETURN_IF_ERROR(MpiStatus(MPI_Improbe(peer, tag, comm_, &found, &probed, &probe_status),
                                    "MPI_Improbe"));
          if (!found) return false;
          int count = 0;
          RETURN_IF_ERROR(
              MpiStatus(MPI_Get_count(&probe_status, MPI_BYTE, &count), "MPI_Get_count"));
          if (count == MPI_UNDEFINED || count < 0) {
            return absl::DataLossError("the message's size does not fit an int");
          }
          buffer->resize(static_cast<size_t>(count));
          RETURN_IF_ERROR(MpiStatus(MPI_Imrecv(buffer->data(), count, MPI_BYTE, &probed, &request),
                                    "MPI_Imrecv"));
          matched = true;
        }
        return TestRequests(requests, {});
      },
      deadline, [this] { return PollAbort(); }, clock(), [&] { return context; });
  if (!status.ok()) {
    Abandon(requests, buffer);
    return InContext(status, context);
  }
  return DecodeFrame(*buffer, message, context);
}

absl::Status ControlChannel::Broadcast(google::protobuf::MessageLite& message, absl::Time deadline,
                                       int tag) {
  if (rank_ != 0) return Recv(0, tag, message, deadline);
  orphans_.Reap();
  const std::string context =
      absl::StrCat("rank 0 broadcasting ", message.GetTypeName(), " (", ControlTagName(tag), ")");
  if (size_ > 1) RETURN_IF_ERROR(WithContext(CheckPeerAndTag(1, tag), context));
  ASSIGN_OR_RETURN(std::string frame, EncodeFrame(message));
  if (frame.size() > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": ", frame.size(), " bytes is more than one MPI message holds"));
  }
  auto buffer = std::make_shared<const std::string>(std::move(frame));
  // requests[i] goes to rank i; requests[0] stays null.
  std::vector<MPI_Request> requests(size_, MPI_REQUEST_NULL);
  for (int peer = 1; peer < size_; ++peer) {
    const absl::Status posted =
        MpiStatus(MPI_Isend(buffer->data(), static_cast<int>(buffer->size()), MPI_BYTE, peer, tag,
                            comm_, &requests[peer]),
                  "MPI_Isend");
    if (!posted.ok()) {
      Abandon(requests, buffer);
      return WithContext(posted, absl::StrCat(context, " to rank ", peer));
    }
  }
  const absl::Status status = WaitForRequests(
      requests, {}, deadline, [this] { return PollAbort(); }, clock(),
      [&] {
        std::vector<int> pending;
        for (int peer = 1; peer < size_; ++peer) {
          if (requests[peer] != MPI_REQUEST_NULL) pending.push_back(peer);
        }
        return absl::StrCat(context, "; not yet delivered to ranks [", absl::StrJoin(pending, ", "),
                            "]");
      });
  if (!status.ok()) orphans_.Adopt(requests, buffer);
  return InContext(status, context);
}

absl::StatusOr<std::vector<std::string>> ControlChannel::GatherToRoot(
    const google::protobuf::MessageLite& message, absl::Time deadline, int tag) {
  if (rank_ != 0) {
    RETURN_IF_ERROR(Send(0, tag, message, deadline));
    return std::vector<std::string>();
  }
  orphans_.Reap();
  const std::string type = message.GetTypeName();
  const std::string context =
      absl::StrCat("rank 0 gathering ", type, " (", ControlTagName(tag), ")");
  if (size_ > 1) RETURN_IF_ERROR(WithContext(CheckPeerAndTag(1, tag), context));
  // Frames land in `frames[peer]`; requests[peer] is null until peer's message is matched.
  auto frames = std::make_shared<std::vector<std::string>>(size_);
  std::vector<MPI_Request> requests(size_, MPI_REQUEST_NULL);
  std::vector<bool> matched(size_, false);
  std::vector<bool> received(size_, false);
  received[0] = true;
  const absl::Status status = PollUntil(
      [&]() -> absl::StatusOr<bool> {
        bool all_received = true;
        for (int peer = 1; peer < size_; ++peer) {
          if (received[peer]) continue;
          if (!matched[peer]) {
            int found = 0;
            MPI_Message probed;
            MPI_Status probe_status;
            RETURN_IF_ERROR(MpiStatus(MPI_Improbe(peer, tag, comm_, &found, &probed, &probe_status),
                                      "MPI_Improbe"));
            if (!found) {
              all_received = false;
              continue;
            }
            int count = 0;
            RETURN_IF_ERROR(
                MpiStatus(MPI_Get_count(&probe_status, MPI_BYTE, &count), "MPI_Get_count"));
            if (count == MPI_UNDEFINED || count < 0) {
              return absl::DataLossError(
                  absl::StrCat("the size of rank ", peer, "'s message does not fit an int"));
            }
            (*frames)[peer].resize(static_cast<size_t>(count));
            RETURN_IF_ERROR(MpiStatus(
                MPI_Imrecv((*frames)[peer].data(), count, MPI_BYTE, &probed, &requests[peer]),
                "MPI_Imrecv"));
            matched[peer] = true;
          }
          ASSIGN_OR_RETURN(const bool done,
                           TestRequests(std::span<MPI_Request>(&requests[peer], 1), {}));
          received[peer] = done;
          all_received = all_received && done;
        }
        return all_received;
      },
      deadline, [this] { return PollAbort(); }, clock(),
      [&] {
        std::vector<int> missing;
        for (int peer = 1; peer < size_; ++peer) {
          if (!received[peer]) missing.push_back(peer);
        }
        return absl::StrCat(context, "; still waiting for ranks [", absl::StrJoin(missing, ", "),
                            "]");
      });
  if (!status.ok()) {
    Abandon(requests, frames);
    return InContext(status, context);
  }
  std::vector<std::string> messages(size_);
  if (!message.SerializeToString(&messages[0])) {
    return absl::InternalError(absl::StrCat(context, ": cannot serialize rank 0's ", type));
  }
  for (int peer = 1; peer < size_; ++peer) {
    ASSIGN_OR_RETURN(
        const absl::string_view payload,
        FramePayload((*frames)[peer], type, absl::StrCat(context, ": message from rank ", peer)));
    messages[peer] = std::string(payload);
  }
  return messages;
}

void ControlChannel::NotifyAbort(const std::string& message) {
  if (!abort_message_) abort_message_ = absl::StrCat("rank ", rank_, " aborted the job: ", message);
  if (abort_sent_) return;
  abort_sent_ = true;
  orphans_.Reap();
  auto text = std::make_shared<const std::string>(message.substr(0, kMaxAbortMessageBytes));
  std::vector<MPI_Request> requests(size_, MPI_REQUEST_NULL);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    // Best effort: a peer we cannot reach is one mpirun will take down anyway.
    if (MPI_Isend(text->data(), static_cast<int>(text->size()), MPI_BYTE, peer, kControlTagAbort,
                  comm_, &requests[peer]) != MPI_SUCCESS) {
      requests[peer] = MPI_REQUEST_NULL;
    }
  }
  // Without an abort poller: this rank is the one aborting.
  (void)WaitForRequests(
      requests, {}, clock().Now() + kControlTagAbortDeliveryTimeout, AbortPoller(), clock(),
      [&] { return std::string("notifying the abort"); },
      /*cancel_on_failure=*/false);
  orphans_.Adopt(requests, text);
}

std::optional<std::string> ControlChannel::PollAbort() {
  if (abort_message_) return abort_message_;
  int found = 0;
  MPI_Message probed;
  MPI_Status probe_status;
  absl::Status status = MpiStatus(
      MPI_Improbe(MPI_ANY_SOURCE, kControlTagAbort, comm_, &found, &probed, &probe_status),
      "MPI_Improbe");
  if (!status.ok()) {
    // Fail-stop: a control plane that cannot be polled is as good as an aborted job.
    abort_message_ = absl::StrCat("rank ", rank_,
                                  " aborted the job: cannot poll for aborts: ", status.message());
    return abort_message_;
  }
  if (!found) return std::nullopt;
  const int source = probe_status.MPI_SOURCE;
  int count = 0;
  auto text = std::make_shared<std::string>();
  MPI_Request request = MPI_REQUEST_NULL;
  status = MpiStatus(MPI_Get_count(&probe_status, MPI_BYTE, &count), "MPI_Get_count");
  if (status.ok() && (count == MPI_UNDEFINED || count < 0)) {
    status = absl::DataLossError("abort message of undefined size");
  }
  if (status.ok()) {
    text->resize(static_cast<size_t>(count));
    status = MpiStatus(MPI_Imrecv(text->data(), count, MPI_BYTE, &probed, &request), "MPI_Imrecv");
  }
  std::span<MPI_Request> requests(&request, 1);
  if (status.ok()) {
    status = WaitForRequests(requests, {}, clock().Now() + kControlTagAbortDeliveryTimeout,
                             AbortPoller(), clock(),
                             [&] { return std::string("receiving an abort message"); });
  }
  if (status.ok()) {
    abort_message_ = absl::StrCat("rank ", source, " aborted the job: ", *text);
  } else {
    orphans_.Adopt(requests, text);
    abort_message_ = absl::StrCat(
        "rank ", source, " aborted the job (its message was lost: ", status.message(), ")");
  }
  return abort_message_;
}

}  // namespace gpipe
