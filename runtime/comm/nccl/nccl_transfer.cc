#include "runtime/comm/nccl/nccl_transfer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_status.h"

namespace gpipe {
namespace {

// Whether the stream has reached `event`: true, false, or the error of the work before it.
absl::StatusOr<bool> Reached(const cuda::Event& event) {
  const cudaError_t state = cudaEventQuery(event.get());
  if (state == cudaErrorNotReady) return false;
  RETURN_IF_ERROR(CudaStatus(state, "cudaEventQuery"));
  return true;
}

}  // namespace

NcclTransferHandle::~NcclTransferHandle() {
  if (!finished_) communicator_->Abandon(std::move(done_.reached), std::move(resources_));
}

bool NcclTransferHandle::Poll() {
  if (finished_) return true;
  // The header comes first on the stream: until it is in, so is nothing else.
  const NcclMilestone& next = header_.has_value() ? *header_ : done_;
  absl::StatusOr<bool> reached = Reached(next.reached);
  if (!reached.ok()) {
    Finish(WithContext(reached.status(), description_));
    return true;
  }
  if (!*reached) {
    if (absl::Status health = communicator_->Health(); !health.ok()) {
      Finish(WithContext(health, description_));
      return true;
    }
    return false;
  }
  absl::Status verdict = next.check ? next.check() : absl::OkStatus();
  if (header_.has_value() && verdict.ok()) {
    header_.reset();
    return Poll();
  }
  if (header_.has_value()) {
    // The payload behind it is not the one expected: NCCL may never finish it.
    communicator_->Abort(std::string(verdict.message()));
    verdict = absl::Status(verdict.code(),
                           absl::StrCat(verdict.message(), "; the NCCL communicator was aborted"));
  }
  Finish(std::move(verdict));
  return true;
}

bool NcclTransferHandle::Done() { return Poll(); }

absl::Status NcclTransferHandle::Wait(absl::Time deadline) {
  if (finished_) return result_;
  absl::Status status = PollUntil([&]() -> absl::StatusOr<bool> { return Poll(); }, deadline,
                                  communicator_->abort_poller(), communicator_->clock(),
                                  [&] { return description_; });
  if (finished_) return result_;
  // Deadline or job abort with the operations still queued: only aborting the communicator
  // ends them (and frees the stream for the shutdown).
  communicator_->Abort(std::string(status.message()));
  Finish(absl::Status(status.code(), absl::StrCat(status.message(), "; the NCCL communicator (",
                                                  communicator_->description(), ") was aborted")));
  return result_;
}

void NcclTransferHandle::Finish(absl::Status status) {
  finished_ = true;
  result_ = std::move(status);
  // After a failure the stream may still be inside the operations: keep their memory until it
  // is not.
  if (!result_.ok()) communicator_->Abandon(std::move(done_.reached), std::move(resources_));
  resources_.reset();
}

absl::Status ConnectNow(const std::shared_ptr<NcclCommunicator>& communicator,
                        absl::FunctionRef<ncclResult_t(float* probe)> operations,
                        absl::Time deadline) {
  float* probe = nullptr;
  GPIPE_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&probe, 2 * sizeof(float), communicator->stream()));
  absl::Status status = communicator->Issue([&] { return operations(probe); }, deadline);
  // Freed in stream order, after the operations.
  cudaFreeAsync(probe, communicator->stream());
  RETURN_IF_ERROR(status);
  ASSIGN_OR_RETURN(cuda::Event connected, communicator->Record());
  NcclTransferHandle handle(communicator, std::nullopt, NcclMilestone{std::move(connected), {}},
                            nullptr, absl::StrCat(communicator->description(), " (connecting)"));
  return handle.Wait(deadline);
}

}  // namespace gpipe
