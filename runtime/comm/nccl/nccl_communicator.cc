#include "runtime/comm/nccl/nccl_communicator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/comm/nccl/nccl_status.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_status.h"

namespace gpipe {

absl::StatusOr<std::shared_ptr<NcclCommunicator>> NcclCommunicator::Create(const ncclUniqueId& id,
                                                                           int size, int member,
                                                                           absl::Time deadline,
                                                                           Options options) {
  ASSIGN_OR_RETURN(cuda::Stream stream, cuda::CreateStream());
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  RETURN_IF_ERROR(WithContext(NcclStatus(ncclCommInitRankConfig(&comm, size, id, member, &config),
                                         "ncclCommInitRankConfig"),
                              options.description));
  // From here the communicator exists (possibly still initializing) and is owned.
  std::shared_ptr<NcclCommunicator> communicator(
      new NcclCommunicator(comm, std::move(stream), size, std::move(options)));
  RETURN_IF_ERROR(communicator->Settle(deadline, "initializing"));
  return communicator;
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) {
    const absl::Time deadline = clock().Now() + kShutdownGrace;
    while (!abandoned_.empty() && clock().Now() < deadline) {
      ReapAbandoned();
      if (!abandoned_.empty()) clock().SleepFor(kMaxPollSleep);
    }
    bool finalized = false;
    if (abandoned_.empty() && Health().ok()) {
      finalized = NcclStatus(ncclCommFinalize(comm_), "ncclCommFinalize", comm_).ok() &&
                  Settle(deadline, "finalizing").ok();
    }
    if (finalized) {
      ncclCommDestroy(comm_);
      comm_ = nullptr;
    } else if (comm_ != nullptr) {
      Abort("shut down with operations still in flight");
    }
  }
  // Aborted operations end; what the stream still runs may use the abandoned tensors.
  cudaStreamSynchronize(stream_.get());
  abandoned_.clear();
}

absl::StatusOr<bool> NcclCommunicator::InProgress() {
  if (comm_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(options_.description, " was aborted earlier: ", abort_reason_));
  }
  ncclResult_t state = ncclSuccess;
  absl::Status status =
      NcclStatus(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError", comm_);
  if (status.ok()) status = NcclStatus(state, "asynchronous error", comm_);
  if (!status.ok()) return Fail(WithContext(status, options_.description));
  return state == ncclInProgress;
}

absl::Status NcclCommunicator::Fail(const absl::Status& status) {
  if (comm_ == nullptr) return status;  // already aborted: the status says why
  Abort(std::string(status.message()));
  return absl::Status(status.code(),
                      absl::StrCat(status.message(), "; the communicator was aborted"));
}

absl::Status NcclCommunicator::Settle(absl::Time deadline, const char* what) {
  const absl::Status status = PollUntil(
      [&]() -> absl::StatusOr<bool> {
        ASSIGN_OR_RETURN(const bool busy, InProgress());
        return !busy;
      },
      deadline, options_.abort_poller, clock(),
      [&] { return absl::StrCat(options_.description, ": ", what); });
  // A deadline or a job abort leaves NCCL working: only aborting ends it.
  return status.ok() ? status : Fail(status);
}

absl::Status NcclCommunicator::After(cudaStream_t producer) {
  // One event serves every call: the wait captures what the event marks when it is issued.
  if (producer_ready_ == nullptr) {
    ASSIGN_OR_RETURN(producer_ready_, cuda::CreateEvent(/*timing=*/false));
  }
  GPIPE_CUDA_RETURN_IF_ERROR(cudaEventRecord(producer_ready_.get(), producer));
  GPIPE_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_.get(), producer_ready_.get(), 0));
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Issue(absl::FunctionRef<ncclResult_t()> operations,
                                     absl::Time deadline) {
  ReapAbandoned();
  RETURN_IF_ERROR(Health());
  absl::Status status = NcclStatus(ncclGroupStart(), "ncclGroupStart", comm_);
  if (status.ok()) {
    status = NcclStatus(operations(), "enqueueing", comm_);
    // The group is closed even after a failed call, so NCCL's group state stays balanced.
    const absl::Status end = NcclStatus(ncclGroupEnd(), "ncclGroupEnd", comm_);
    if (status.ok()) status = end;
  }
  if (!status.ok()) return Fail(WithContext(status, options_.description));
  return Settle(deadline, "issuing a group");
}

absl::StatusOr<cuda::Event> NcclCommunicator::Record() {
  ASSIGN_OR_RETURN(cuda::Event done, cuda::CreateEvent(/*timing=*/false));
  GPIPE_CUDA_RETURN_IF_ERROR(cudaEventRecord(done.get(), stream_.get()));
  return done;
}

absl::Status NcclCommunicator::Health() { return InProgress().status(); }

void NcclCommunicator::Abort(const std::string& why) {
  if (comm_ == nullptr) return;
  ncclCommAbort(comm_);
  comm_ = nullptr;
  abort_reason_ = why;
}

void NcclCommunicator::Abandon(cuda::Event done, std::shared_ptr<const void> resources) {
  abandoned_.push_back(Abandoned{std::move(done), std::move(resources)});
}

void NcclCommunicator::ReapAbandoned() {
  std::erase_if(abandoned_, [](const Abandoned& entry) {
    return cudaEventQuery(entry.done.get()) != cudaErrorNotReady;
  });
}

ncclDataType_t NcclElementType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kI64:
      return ncclInt64;
    case DType::kF64:
      return ncclFloat64;
    case DType::kBF16:
      return ncclBfloat16;
  }
  return ncclChar;
}

}  // namespace gpipe
