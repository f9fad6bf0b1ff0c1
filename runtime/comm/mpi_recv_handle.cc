#include "runtime/comm/mpi_recv_handle.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/comm/mpi_status.h"
#include "runtime/comm/wait.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// How long a deadline diagnosis may wait for the bytes of a stray header it found.
constexpr absl::Duration kStrayHeaderTimeout = absl::Seconds(1);

}  // namespace

absl::StatusOr<std::unique_ptr<MpiRecvHandle>> MpiRecvHandle::Start(
    std::shared_ptr<DataChannelContext> context, Tensor& tensor, int peer, const TransferKey& key) {
  context->orphans.Reap();
  const std::string what =
      tensor.defined() ? Describe(key, tensor.dtype(), tensor.shape()) : ToString(key);
  const std::string description =
      absl::StrCat("rank ", context->rank, " receiving ", what, " from rank ", peer);
  ASSIGN_OR_RETURN(const TransferTags tags,
                   PrepareTransfer(*context, tensor, peer, key, description));
  auto buffers = std::make_shared<Buffers>();
  buffers->tensor = tensor;
  std::unique_ptr<MpiRecvHandle> handle(new MpiRecvHandle(
      context, buffers, peer,
      TransferHeader{
          .key = key, .dtype = tensor.dtype(), .shape = tensor.shape(), .sender = peer}));
  handle->payload_tag_ = tags.payload;
  RETURN_IF_ERROR(
      WithContext(MpiStatus(MPI_Irecv(buffers->header.data(), sizeof(HeaderWords), MPI_BYTE, peer,
                                      tags.header, context->comm, &handle->requests_[kHeader]),
                            "MPI_Irecv(header)"),
                  description));
  context->AddPendingReceive(handle.get());
  // Poll once so that an already-arrived header gets its payload receive posted right away.
  handle->Progress();
  return handle;
}

MpiRecvHandle::MpiRecvHandle(std::shared_ptr<DataChannelContext> context,
                             std::shared_ptr<Buffers> buffers, int peer, TransferHeader expected)
    : context_(std::move(context)),
      buffers_(std::move(buffers)),
      peer_(peer),
      expected_(std::move(expected)),
      description_(absl::StrCat("rank ", context_->rank, " receiving ", Describe(expected_),
                                " from rank ", peer_)) {}

MpiRecvHandle::~MpiRecvHandle() {
  if (!finished_) Finish(absl::CancelledError("destroyed before it finished"));
}

void MpiRecvHandle::Finish(absl::Status status) {
  finished_ = true;
  context_->RemovePendingReceive(this);
  result_ = std::move(status);
  context_->Abandon(requests_, buffers_);
  buffers_.reset();
}

bool MpiRecvHandle::Progress() {
  static constexpr const char* kWhat[] = {"MPI_Test(header)", "MPI_Test(payload)"};
  auto test = [&](int i) {
    if (requests_[i] == MPI_REQUEST_NULL) return;
    int done = 0;
    MPI_Status status;
    const int code = MPI_Test(&requests_[i], &done, &status);
    if (code != MPI_SUCCESS) {
      // A receive that failed (e.g. truncated) is finished; MPI has freed it.
      requests_[i] = MPI_REQUEST_NULL;
      errors_[i] = MpiStatus(code, kWhat[i]);
    } else if (done) {
      statuses_[i] = status;
    }
  };
  test(kHeader);
  if (requests_[kHeader] != MPI_REQUEST_NULL) return false;
  if (!errors_[kHeader].ok()) return true;
  if (!payload_posted_) {
    payload_posted_ = true;
    if (std::optional<absl::Status> mismatch = HeaderMismatch("")) {
      mismatch_ = *std::move(mismatch);
      PostDrain();
    } else {
      errors_[kPayload] = MpiStatus(
          MPI_Irecv(buffers_->tensor.raw_data(), static_cast<int>(buffers_->tensor.num_elements()),
                    MpiElementType(expected_.dtype), peer_, payload_tag_, context_->comm,
                    &requests_[kPayload]),
          "MPI_Irecv(payload)");
    }
  }
  test(kPayload);
  return requests_[kPayload] == MPI_REQUEST_NULL;
}

void MpiRecvHandle::PostDrain() {
  absl::StatusOr<TransferHeader> received = DecodeHeader(buffers_->header);
  if (!received.ok()) return;  // garbage header: nothing trustworthy to drain
  absl::StatusOr<int> tag = TransferTag(received->key, TransferPart::kPayload, context_->tag_ub);
  if (!tag.ok()) return;
  const int64_t bytes = received->shape.num_elements() * SizeOf(received->dtype);
  if (bytes < 0 || bytes > std::numeric_limits<int>::max()) return;
  buffers_->drain.resize(static_cast<size_t>(bytes));
  // A failure here only means the sender's payload stays unmatched; the mismatch is the error.
  MPI_Irecv(buffers_->drain.data(), static_cast<int>(bytes), MPI_BYTE, peer_, *tag, context_->comm,
            &requests_[kPayload]);
}

absl::Status MpiRecvHandle::MismatchError(const TransferHeader& received,
                                          const std::string& note) const {
  std::string message = absl::StrCat("rank ", context_->rank, " expected ", Describe(expected_),
                                     " from rank ", peer_, " but received ", Describe(received));
  if (received.sender != peer_)
    absl::StrAppend(&message, " claiming to be from rank ", received.sender);
  absl::StrAppend(&message, note);
  return absl::InvalidArgumentError(message);
}

std::optional<absl::Status> MpiRecvHandle::HeaderMismatch(const std::string& note) {
  if (requests_[kHeader] != MPI_REQUEST_NULL || !errors_[kHeader].ok()) return std::nullopt;
  absl::StatusOr<TransferHeader> received = DecodeHeader(buffers_->header);
  if (!received.ok()) return WithContext(received.status(), description_);
  if (SameTransfer(*received, expected_) && received->sender == peer_) return std::nullopt;
  return MismatchError(*received, note);
}

absl::Status MpiRecvHandle::Evaluate() {
  if (!errors_[kHeader].ok()) {
    return WithContext(errors_[kHeader],
                       absl::StrCat(description_, ": the transfer header did not arrive intact"));
  }
  if (mismatch_.has_value()) return *mismatch_;
  if (!errors_[kPayload].ok()) {
    return absl::DataLossError(absl::StrCat(description_,
                                            ": the payload is not the size its header announced (",
                                            errors_[kPayload].message(), ")"));
  }
  int count = 0;
  RETURN_IF_ERROR(WithContext(
      MpiStatus(MPI_Get_count(&statuses_[kPayload], MpiElementType(expected_.dtype), &count),
                "MPI_Get_count"),
      description_));
  if (count != buffers_->tensor.num_elements()) {
    return absl::DataLossError(absl::StrCat(description_, ": the payload holds ", count,
                                            " elements instead of ",
                                            buffers_->tensor.num_elements()));
  }
  return absl::OkStatus();
}

std::optional<TransferHeader> MpiRecvHandle::ProbeStrayHeader() {
  MPI_Comm comm = context_->comm;
  int found = 0;
  MPI_Status first;
  if (MPI_Iprobe(peer_, MPI_ANY_TAG, comm, &found, &first) != MPI_SUCCESS || !found) {
    return std::nullopt;
  }
  const DecodedTag tag = DecodeTag(first.MPI_TAG);
  const MessageClass expected_class = expected_.key.kind == TransferKind::kActivation
                                          ? MessageClass::kActivation
                                          : MessageClass::kGradient;
  if (tag.part != TransferPart::kHeader || tag.message_class != expected_class ||
      tag.skip_layer != expected_.key.skip_layer ||
      (expected_.key.skip_layer < 0 && tag.chunk != expected_.key.chunk)) {
    return std::nullopt;
  }
  MPI_Message message;
  MPI_Status probed;
  found = 0;
  if (MPI_Improbe(peer_, first.MPI_TAG, comm, &found, &message, &probed) != MPI_SUCCESS || !found) {
    return std::nullopt;
  }
  // The message is ours now and must be received whatever its size.
  int count = 0;
  if (MPI_Get_count(&probed, MPI_BYTE, &count) != MPI_SUCCESS || count == MPI_UNDEFINED) {
    count = 0;
  }
  auto bytes = std::make_shared<std::vector<char>>(static_cast<size_t>(count));
  MPI_Request request = MPI_REQUEST_NULL;
  if (MPI_Imrecv(bytes->data(), count, MPI_BYTE, &message, &request) != MPI_SUCCESS) {
    return std::nullopt;
  }
  std::span<MPI_Request> requests(&request, 1);
  const absl::Status received = WaitForRequests(
      requests, {}, context_->clock().Now() + kStrayHeaderTimeout, AbortPoller(), context_->clock(),
      [] { return std::string("receiving a stray transfer header"); });
  if (!received.ok()) {
    context_->Abandon(requests, bytes);
    return std::nullopt;
  }
  if (count != static_cast<int>(sizeof(HeaderWords))) return std::nullopt;
  HeaderWords words;
  std::memcpy(words.data(), bytes->data(), sizeof(HeaderWords));
  absl::StatusOr<TransferHeader> header = DecodeHeader(words);
  if (!header.ok()) return std::nullopt;
  return *header;
}

void MpiRecvHandle::Poll() {
  if (!finished_ && !payload_posted_) Progress();
}

void DataChannelContext::ProgressPendingReceives() {
  // Copy: polling never adds or removes handles, but keep iteration independent of that.
  const std::vector<MpiRecvHandle*> handles(pending_receives.begin(), pending_receives.end());
  for (MpiRecvHandle* handle : handles) handle->Poll();
}

bool MpiRecvHandle::Done() {
  if (finished_) return true;
  context_->ProgressPendingReceives();
  if (!Progress()) return false;
  Finish(Evaluate());
  return true;
}

absl::Status MpiRecvHandle::Wait(absl::Time deadline) {
  if (finished_) return result_;
  const absl::Time start = context_->clock().Now();
  const absl::Status status = PollUntil(
      [&]() -> absl::StatusOr<bool> {
        context_->ProgressPendingReceives();
        return Progress();
      },
      deadline, context_->abort_poller, context_->clock(), [&] { return description_; });
  if (status.ok()) {
    Finish(Evaluate());
    return result_;
  }
  // A mismatch already seen is the root cause, whatever ended the wait.
  if (std::optional<absl::Status> mismatch = HeaderMismatch("")) {
    Finish(*mismatch);
    return result_;
  }
  if (absl::IsDeadlineExceeded(status) && requests_[kHeader] != MPI_REQUEST_NULL) {
    if (std::optional<TransferHeader> stray = ProbeStrayHeader()) {
      Finish(MismatchError(
          *stray, absl::StrFormat(
                      " (nothing with the expected key arrived within %.1fs)",
                      absl::ToDoubleSeconds(std::max(deadline - start, absl::ZeroDuration())))));
      return result_;
    }
  }
  Finish(status);
  return result_;
}

}  // namespace gpipe
