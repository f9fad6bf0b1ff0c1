// NcclCommunicator: one NCCL communicator, the CUDA stream its operations run on, and the
// operations abandoned on it that may still touch memory. Created non-blocking (NCCL's
// ncclConfig_t.blocking = 0) so that every step that waits for other ranks (initialization,
// connection set-up inside a group, finalization) is polled against a deadline and the job's
// abort flag instead of hanging; an error or a missed deadline aborts the communicator
// (ncclCommAbort ends its pending operations), after which it refuses new work.
//
// Shared ownership (std::shared_ptr): the channel and every handle of an operation on it keep
// it alive. Thread-compatible: one thread drives it, with its GPU current.
#ifndef GPIPE_RUNTIME_COMM_NCCL_NCCL_COMMUNICATOR_H_
#define GPIPE_RUNTIME_COMM_NCCL_NCCL_COMMUNICATOR_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/comm/clock.h"
#include "runtime/comm/wait.h"
#include "runtime/core/dtype.h"
#include "runtime/device/cuda/cuda_handles.h"

namespace gpipe {

class NcclCommunicator {
 public:
  struct Options {
    // What the communicator connects, for errors: "rank 2's NCCL link to rank 3".
    std::string description;
    AbortPoller abort_poller;
    // Nullable (real time); outlives the communicator and every handle of an operation on it.
    const Clock* clock = nullptr;
  };

  // Collective over the `size` members: each passes the same `id` (made by one member with
  // ncclGetUniqueId and handed to the others) and its own index `member`. Polls the
  // initialization until `deadline`; DEADLINE_EXCEEDED (a member never came) or ABORTED (the
  // job was aborted meanwhile) abort the half-made communicator.
  static absl::StatusOr<std::shared_ptr<NcclCommunicator>> Create(const ncclUniqueId& id, int size,
                                                                  int member, absl::Time deadline,
                                                                  Options options);
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;
  // Healthy and idle: finalizes (waiting at most kShutdownGrace for operations still in flight)
  // and destroys the communicator; otherwise aborts it. Either way waits for its stream.
  ~NcclCommunicator();

  ncclComm_t comm() const { return comm_; }
  cudaStream_t stream() const { return stream_.get(); }
  const std::string& description() const { return options_.description; }
  int size() const { return size_; }
  const Clock& clock() const { return options_.clock != nullptr ? *options_.clock : real_clock_; }
  const AbortPoller& abort_poller() const { return options_.abort_poller; }

  // Makes this communicator's stream wait for all work issued on `producer` so far (the
  // compute stream that wrote a tensor about to be sent, or freed the memory about to be
  // received into).
  absl::Status After(cudaStream_t producer);
  // Issues `operations` (ncclSend / ncclRecv / ncclAllReduce calls on comm() and stream(),
  // returning the first failure) as one NCCL group, then polls until NCCL has accepted the group
  // (connection set-up may take a while; the operations themselves complete later, on the
  // stream). FAILED_PRECONDITION once aborted; on an error or at `deadline` the communicator is
  // aborted and the status says so.
  absl::Status Issue(absl::FunctionRef<ncclResult_t()> operations, absl::Time deadline);
  // An event on the stream after everything issued so far.
  absl::StatusOr<cuda::Event> Record();
  // OK while NCCL reports no asynchronous error on the communicator (a peer failed, a network
  // error); otherwise that error, and the communicator is aborted.
  absl::Status Health();
  // Ends the communicator and its pending operations (ncclCommAbort); `why` is repeated by every
  // later refusal. Idempotent.
  void Abort(const std::string& why);
  bool aborted() const { return comm_ == nullptr; }

  // Keeps `resources` (tensors an operation whose handle was dropped may still read or write)
  // until `done` has completed; released by later calls, or by the destructor after the
  // stream is through.
  void Abandon(cuda::Event done, std::shared_ptr<const void> resources);

  // How long the destructor lets operations still in flight finish before it aborts.
  static constexpr absl::Duration kShutdownGrace = absl::Seconds(10);

 private:
  NcclCommunicator(ncclComm_t comm, cuda::Stream stream, int size, Options options)
      : comm_(comm), stream_(std::move(stream)), size_(size), options_(std::move(options)) {}
  // ncclCommGetAsyncError: true while NCCL is still working on a non-blocking call, false when
  // done and healthy; an error (FAILED_PRECONDITION once aborted) aborts the communicator.
  absl::StatusOr<bool> InProgress();
  // Aborts the communicator with `status` (unless already aborted) and returns it, saying so.
  absl::Status Fail(const absl::Status& status);
  // Polls InProgress until it is false; a deadline or job abort aborts the communicator.
  absl::Status Settle(absl::Time deadline, const char* what);
  void ReapAbandoned();

  struct Abandoned {
    cuda::Event done;
    std::shared_ptr<const void> resources;
  };

  ncclComm_t comm_;
  cuda::Stream stream_;
  int size_;
  Options options_;
  RealClock real_clock_;
  cuda::Event producer_ready_;  // After's event, created on first use
  std::string abort_reason_;
  std::vector<Abandoned> abandoned_;
};

// The NCCL element type of `dtype` (all gpipe dtypes have one).
ncclDataType_t NcclElementType(DType dtype);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_NCCL_NCCL_COMMUNICATOR_H_
