#include "runtime/comm/mpi_send_handle.h"

#include "absl/strings/str_cat.h"
#include "runtime/comm/mpi_status.h"
#include "runtime/comm/wait.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<MpiSendHandle>> MpiSendHandle::Start(
    std::shared_ptr<DataChannelContext> context, const Tensor& tensor, int peer,
    const TransferKey& key) {
  context->orphans.Reap();
  std::string description = absl::StrCat("rank ", context->rank, " sending ");
  absl::StrAppend(&description,
                  tensor.defined() ? Describe(key, tensor.dtype(), tensor.shape()) : ToString(key),
                  " to rank ", peer);
  ASSIGN_OR_RETURN(const TransferTags tags,
                   PrepareTransfer(*context, tensor, peer, key, description));
  auto buffers = std::make_shared<Buffers>();
  buffers->tensor = tensor;
  ASSIGN_OR_RETURN(
      buffers->header,
      EncodeHeader(TransferHeader{
          .key = key, .dtype = tensor.dtype(), .shape = tensor.shape(), .sender = context->rank}));
  std::unique_ptr<MpiSendHandle> handle(
      new MpiSendHandle(context, buffers, std::move(description)));
  MPI_Comm comm = context->comm;
  RETURN_IF_ERROR(
      WithContext(MpiStatus(MPI_Isend(buffers->header.data(), sizeof(HeaderWords), MPI_BYTE, peer,
                                      tags.header, comm, &handle->requests_[0]),
                            "MPI_Isend(header)"),
                  handle->description_));
  // On failure the destructor abandons the posted header.
  RETURN_IF_ERROR(WithContext(
      MpiStatus(MPI_Isend(buffers->tensor.raw_data(), static_cast<int>(tensor.num_elements()),
                          MpiElementType(tensor.dtype()), peer, tags.payload, comm,
                          &handle->requests_[1]),
                "MPI_Isend(payload)"),
      handle->description_));
  return handle;
}

MpiSendHandle::~MpiSendHandle() {
  if (!finished_) Finish(absl::CancelledError("destroyed before it finished"));
}

void MpiSendHandle::Finish(absl::Status status) {
  finished_ = true;
  result_ = std::move(status);
  context_->Abandon(requests_, buffers_);
  buffers_.reset();
}

bool MpiSendHandle::Done() {
  if (finished_) return true;
  context_->ProgressPendingReceives();
  absl::StatusOr<bool> done = TestRequests(requests_, {});
  if (!done.ok()) {
    Finish(WithContext(done.status(), description_));
    return true;
  }
  if (*done) Finish(absl::OkStatus());
  return *done;
}

absl::Status MpiSendHandle::Wait(absl::Time deadline) {
  if (finished_) return result_;
  // Finish cancels and abandons whatever is still active if the wait fails.
  absl::Status status = PollUntil(
      [&] {
        context_->ProgressPendingReceives();
        return TestRequests(requests_, {});
      },
      deadline, context_->abort_poller, context_->clock(), [&] { return description_; });
  if (!status.ok() && !absl::IsDeadlineExceeded(status) && !absl::IsAborted(status)) {
    status = WithContext(status, description_);
  }
  Finish(std::move(status));
  return result_;
}

}  // namespace gpipe
