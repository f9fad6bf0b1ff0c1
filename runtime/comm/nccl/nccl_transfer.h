// NcclTransferHandle: the TransferHandle of operations issued on an NcclCommunicator's stream.
// It is done when the event recorded after them has completed; a receive also has an earlier
// event after its header arrived, checked as soon as it completes, so a transfer that is not the
// one expected fails at once naming both sides instead of running into the deadline. Polling
// also reads the communicator's asynchronous error. A failed or timed-out wait aborts the
// communicator (NCCL's operations cannot be cancelled one by one), and the message says so.
// Internal to comm/nccl. Thread-compatible.
#ifndef GPIPE_RUNTIME_COMM_NCCL_NCCL_TRANSFER_H_
#define GPIPE_RUNTIME_COMM_NCCL_NCCL_TRANSFER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/comm/data_channel.h"
#include "runtime/comm/nccl/nccl_communicator.h"
#include "runtime/device/cuda/cuda_handles.h"

namespace gpipe {

// A point the stream reaches, and what to check once it has.
struct NcclMilestone {
  cuda::Event reached;
  // Returns the transfer's error when what arrived is wrong (may be empty: nothing to check).
  std::function<absl::Status()> check;
};

class NcclTransferHandle final : public TransferHandle {
 public:
  // `resources` (the tensors and header buffers the operations use) are kept until `done` is
  // reached, also when the handle is dropped before that (then by the communicator).
  // `description` prefixes every error: "rank 1 receiving activation step=3 mb=5 f32[8] from
  // rank 0 over NCCL".
  NcclTransferHandle(std::shared_ptr<NcclCommunicator> communicator,
                     std::optional<NcclMilestone> header, NcclMilestone done,
                     std::shared_ptr<const void> resources, std::string description)
      : communicator_(std::move(communicator)),
        header_(std::move(header)),
        done_(std::move(done)),
        resources_(std::move(resources)),
        description_(std::move(description)) {}
  NcclTransferHandle(const NcclTransferHandle&) = delete;
  NcclTransferHandle& operator=(const NcclTransferHandle&) = delete;
  ~NcclTransferHandle() override;

  bool Done() override;
  absl::Status Wait(absl::Time deadline) override;

 private:
  // One poll: true when finished (result_ set), false while in flight.
  bool Poll();
  void Finish(absl::Status status);

  std::shared_ptr<NcclCommunicator> communicator_;
  std::optional<NcclMilestone> header_;
  NcclMilestone done_;
  std::shared_ptr<const void> resources_;
  std::string description_;
  bool finished_ = false;
  absl::Status result_;
};

// Connects `communicator` at set-up rather than in the first step (NCCL connects point-to-point
// peers at their first transfer, rings and trees at the first collective): issues `operations`
// on a device float it provides (`probe`, two elements) as one group and waits for them under
// `deadline`. A failure aborts the communicator, as any wait does.
absl::Status ConnectNow(const std::shared_ptr<NcclCommunicator>& communicator,
                        absl::FunctionRef<ncclResult_t(float* probe)> operations,
                        absl::Time deadline);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_NCCL_NCCL_TRANSFER_H_
