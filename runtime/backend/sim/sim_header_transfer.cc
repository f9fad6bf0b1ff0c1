#include "runtime/backend/sim/sim_header_transfer.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/comm/mpi_status.h"
#include "runtime/comm/wait.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

absl::Duration LinkTime(const TransferTimeModel& model, const Tensor& tensor) {
  return model ? std::max(model(tensor.bytes()), absl::ZeroDuration()) : absl::ZeroDuration();
}

// What every headers-only transfer needs: a defined tensor whose shape a header can carry
// (its storage is never touched, so it need not be host memory), a peer in the channel, and a
// key that fits the tag space. Returns the header tag.
absl::StatusOr<int> HeaderTag(const DataChannelContext& context, const Tensor& tensor, int peer,
                              const TransferKey& key, const std::string& description) {
  if (!tensor.defined()) {
    return absl::InvalidArgumentError(absl::StrCat(description, ": the tensor is undefined"));
  }
  if (peer < 0 || peer >= context.size) {
    return absl::InvalidArgumentError(
        absl::StrCat(description, ": no such rank (ranks 0..", context.size - 1, ")"));
  }
  absl::StatusOr<int> tag = TransferTag(key, TransferPart::kHeader, context.tag_ub);
  if (!tag.ok()) return WithContext(tag.status(), description);
  return *tag;
}

// Sleeps until `ready_at`, but not past `deadline`; DEADLINE_EXCEEDED if that comes first.
absl::Status SleepUntilReady(absl::Time ready_at, absl::Time deadline, const Clock& clock,
                             const std::string& description) {
  const absl::Time now = clock.Now();
  if (ready_at <= now) return absl::OkStatus();
  if (ready_at > deadline) {
    clock.SleepFor(std::max(deadline - now, absl::ZeroDuration()));
    return absl::DeadlineExceededError(
        absl::StrCat(description, ": the modelled transfer ends after the deadline"));
  }
  clock.SleepFor(ready_at - now);
  return absl::OkStatus();
}

}  // namespace

// ---- send --------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<SimHeaderSendHandle>> SimHeaderSendHandle::Start(
    std::shared_ptr<DataChannelContext> context, const Tensor& tensor, int peer,
    const TransferKey& key, const TransferTimeModel& model) {
  context->orphans.Reap();
  const std::string description =
      absl::StrCat("rank ", context->rank, " sending ",
                   tensor.defined() ? Describe(key, tensor.dtype(), tensor.shape()) : ToString(key),
                   " (headers only) to rank ", peer);
  ASSIGN_OR_RETURN(const int tag, HeaderTag(*context, tensor, peer, key, description));
  auto buffers = std::make_shared<Buffers>();
  ASSIGN_OR_RETURN(
      const HeaderWords header,
      EncodeHeader(TransferHeader{
          .key = key, .dtype = tensor.dtype(), .shape = tensor.shape(), .sender = context->rank}));
  const absl::Time posted = context->clock().Now();
  std::copy(header.begin(), header.end(), buffers->words.begin());
  buffers->words.back() = absl::ToUnixNanos(posted);
  std::unique_ptr<SimHeaderSendHandle> handle(
      new SimHeaderSendHandle(context, buffers, description));
  handle->ready_at_ = posted + LinkTime(model, tensor);
  RETURN_IF_ERROR(
      WithContext(MpiStatus(MPI_Isend(buffers->words.data(), sizeof(TimedHeaderWords), MPI_BYTE,
                                      peer, tag, context->comm, &handle->request_[0]),
                            "MPI_Isend(header)"),
                  handle->description_));
  return handle;
}

SimHeaderSendHandle::~SimHeaderSendHandle() {
  if (!finished_) Finish(absl::CancelledError("destroyed before it finished"));
}

void SimHeaderSendHandle::Finish(absl::Status status) {
  finished_ = true;
  result_ = std::move(status);
  context_->Abandon(request_, buffers_);
  buffers_.reset();
}

bool SimHeaderSendHandle::Done() {
  if (finished_) return true;
  absl::StatusOr<bool> sent = TestRequests(request_, {});
  if (!sent.ok()) {
    Finish(WithContext(sent.status(), description_));
    return true;
  }
  if (!*sent || context_->clock().Now() < ready_at_) return false;
  Finish(absl::OkStatus());
  return true;
}

absl::Status SimHeaderSendHandle::Wait(absl::Time deadline) {
  if (finished_) return result_;
  absl::Status status =
      PollUntil([&] { return TestRequests(request_, {}); }, deadline, context_->abort_poller,
                context_->clock(), [&] { return description_; });
  if (!status.ok() && !absl::IsDeadlineExceeded(status) && !absl::IsAborted(status)) {
    status = WithContext(status, description_);
  }
  if (status.ok()) status = SleepUntilReady(ready_at_, deadline, context_->clock(), description_);
  Finish(std::move(status));
  return result_;
}

// ---- receive -----------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<SimHeaderRecvHandle>> SimHeaderRecvHandle::Start(
    std::shared_ptr<DataChannelContext> context, Tensor& tensor, int peer, const TransferKey& key,
    const TransferTimeModel& model) {
  context->orphans.Reap();
  const std::string description =
      absl::StrCat("rank ", context->rank, " receiving ",
                   tensor.defined() ? Describe(key, tensor.dtype(), tensor.shape()) : ToString(key),
                   " (headers only) from rank ", peer);
  ASSIGN_OR_RETURN(const int tag, HeaderTag(*context, tensor, peer, key, description));
  auto buffers = std::make_shared<Buffers>();
  buffers->tensor = tensor;
  std::unique_ptr<SimHeaderRecvHandle> handle(new SimHeaderRecvHandle(
      context, buffers, peer,
      TransferHeader{.key = key, .dtype = tensor.dtype(), .shape = tensor.shape(), .sender = peer},
      LinkTime(model, tensor)));
  handle->description_ = description;
  RETURN_IF_ERROR(
      WithContext(MpiStatus(MPI_Irecv(buffers->words.data(), sizeof(TimedHeaderWords), MPI_BYTE,
                                      peer, tag, context->comm, &handle->request_[0]),
                            "MPI_Irecv(header)"),
                  description));
  return handle;
}

SimHeaderRecvHandle::SimHeaderRecvHandle(std::shared_ptr<DataChannelContext> context,
                                         std::shared_ptr<Buffers> buffers, int peer,
                                         TransferHeader expected, absl::Duration link_time)
    : context_(std::move(context)),
      buffers_(std::move(buffers)),
      peer_(peer),
      expected_(std::move(expected)),
      link_time_(link_time) {}

SimHeaderRecvHandle::~SimHeaderRecvHandle() {
  if (!finished_) Finish(absl::CancelledError("destroyed before it finished"));
}

void SimHeaderRecvHandle::Finish(absl::Status status) {
  finished_ = true;
  result_ = std::move(status);
  context_->Abandon(request_, buffers_);
  buffers_.reset();
}

bool SimHeaderRecvHandle::Arrived() {
  if (finished_ || arrived_) return true;
  std::array<MPI_Status, 1> statuses{};
  absl::StatusOr<bool> in = TestRequests(request_, statuses);
  if (!in.ok()) {
    Finish(WithContext(in.status(),
                       absl::StrCat(description_, ": the transfer header did not arrive intact")));
    return true;
  }
  if (!*in) return false;
  const absl::Time seen = context_->clock().Now();
  int bytes = 0;
  if (MPI_Get_count(&statuses[0], MPI_BYTE, &bytes) != MPI_SUCCESS ||
      bytes != static_cast<int>(sizeof(TimedHeaderWords))) {
    Finish(absl::DataLossError(absl::StrCat(
        description_, ": received ", bytes, " bytes instead of a headers-only transfer (",
        sizeof(TimedHeaderWords), " bytes); do both sides run the same device?")));
    return true;
  }
  HeaderWords words;
  std::copy_n(buffers_->words.begin(), words.size(), words.begin());
  absl::StatusOr<TransferHeader> received = DecodeHeader(words);
  if (!received.ok()) {
    Finish(WithContext(received.status(), description_));
    return true;
  }
  if (!SameTransfer(*received, expected_) || received->sender != peer_) {
    std::string message = absl::StrCat("rank ", context_->rank, " expected ", Describe(expected_),
                                       " from rank ", peer_, " but received ", Describe(*received));
    if (received->sender != peer_) {
      absl::StrAppend(&message, " claiming to be from rank ", received->sender);
    }
    Finish(absl::InvalidArgumentError(message));
    return true;
  }
  arrived_ = true;
  // The sender's post time, but never later than now: clock skew cannot add to the wait.
  const absl::Time posted = std::min(absl::FromUnixNanos(buffers_->words.back()), seen);
  ready_at_ = posted + link_time_;
  return true;
}

bool SimHeaderRecvHandle::Done() {
  if (finished_) return true;
  if (!Arrived() || finished_) return finished_;
  if (context_->clock().Now() < ready_at_) return false;
  Finish(absl::OkStatus());
  return true;
}

absl::Status SimHeaderRecvHandle::Wait(absl::Time deadline) {
  if (finished_) return result_;
  absl::Status status =
      PollUntil([&]() -> absl::StatusOr<bool> { return Arrived(); }, deadline,
                context_->abort_poller, context_->clock(), [&] { return description_; });
  if (finished_) return result_;  // the header arrived and failed its checks
  if (status.ok()) status = SleepUntilReady(ready_at_, deadline, context_->clock(), description_);
  Finish(std::move(status));
  return result_;
}

}  // namespace gpipe
