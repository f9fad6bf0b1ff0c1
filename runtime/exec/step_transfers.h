// StepTransfers: a stage's boundary transfers during one step. Receives are posted ahead of
// the instructions that consume them (config.recv_lookahead at a time, in program order) into
// buffers counted as kBoundary (activations) or kBoundaryGrad (gradients); sends run
// asynchronously and are reaped as they complete, so transfers overlap compute. Each transfer is
// keyed by the receiving side's chunk and recorded in the trace from post to completion. A
// transfer whose peer is this rank (a V_SHAPE turn: one chunk feeds the other) is a local
// hand-off: the send parks the tensor, in the wire dtype as a transfer would deliver it, and the
// receive takes it; the channel is not involved.
// Single-threaded; lives for one step.
#ifndef GPIPE_RUNTIME_EXEC_STEP_TRANSFERS_H_
#define GPIPE_RUNTIME_EXEC_STEP_TRANSFERS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/comm/data_channel.h"
#include "runtime/core/tensor.h"
#include "runtime/exec/executor_config.h"
#include "runtime/exec/micro_batch_state.h"
#include "runtime/exec/step_scope.h"
#include "runtime/schedule/instruction.h"

namespace gpipe {

class StepTransfers {
 public:
  // Every reference must outlive the object.
  StepTransfers(const StepScope& scope, const schedule::StageProgram& program,
                const ExecutorResources& resources, const MicroBatchStates& states,
                int64_t micro_batch_size);

  // Where the receives of the step land: `buffers(key)` gives a tensor its consumer keeps for
  // the transfer `key` (runtime.cuda.graphs' input buffers, StepGraphs::ReceiveBuffer), or an
  // undefined one for a new buffer; a kept tensor of another shape or dtype than the transfer's
  // is not used. Without a call, every receive gets a new buffer. Set before the first post.
  void ReceiveInto(std::function<Tensor(const TransferKey&)> buffers) {
    buffers_ = std::move(buffers);
  }

  // Posts receives until `count` are outstanding (or none are left in the program).
  absl::Status PostReceivesUpTo(int count);
  // Lets every posted receive progress between instructions (a transport may need that to start
  // the payload transfer); errors surface when the receive is consumed.
  void PollPostedReceives();
  // Waits for the receive of the instruction at `position` and returns its tensor as it came
  // over the wire (ExecutorConfig::boundary_dtype: bf16 under training.precision BF16), then
  // tops up the receives posted ahead.
  absl::StatusOr<Tensor> CompleteReceive(size_t position);

  // Sends `tensor` to `peer` under `key`; `chunk` is the sending chunk.
  absl::Status StartSend(Tensor tensor, int peer, const TransferKey& key, int chunk);
  // Drops completed sends; a send that failed reports its error here, naming its transfer.
  absl::Status ReapFinishedSends();
  // Waits for every send in flight.
  absl::Status WaitForSends();

  // Payload bytes of the sends started and of the receives completed so far in the step (local
  // hand-offs move no bytes and are not counted).
  int64_t bytes_sent() const { return bytes_sent_; }
  int64_t bytes_received() const { return bytes_received_; }

 private:
  struct PostedReceive {
    bool posted = false;
    bool local = false;  // a hand-off from this rank's other chunk: no handle
    Tensor buffer;
    std::unique_ptr<TransferHandle> handle;
    TransferKey key;
    int chunk = 0;
    int peer = -1;
    int64_t posted_ns = 0;
    int64_t done_ns = -1;  // when a poll first saw it complete
  };
  struct InFlightSend {
    TransferKey key;
    std::unique_ptr<TransferHandle> handle;
    int chunk = 0;
    int peer = -1;
    int64_t bytes = 0;
    int64_t posted_ns = 0;
  };

  // The tensor as it travels: narrowed to config.boundary_dtype (training.precision BF16).
  absl::StatusOr<Tensor> ToWire(Tensor tensor) const;
  // Removes and returns the parked local hand-off `key`; FAILED_PRECONDITION when none is.
  absl::StatusOr<Tensor> TakeParked(const TransferKey& key);
  absl::Status PostNextReceive();
  absl::Status PostReceive(size_t position);
  void RecordSend(const InFlightSend& send) const;

  const StepScope& scope_;
  const schedule::StageProgram& program_;
  const ExecutorResources& res_;
  const MicroBatchStates& states_;
  const int64_t micro_batch_size_;
  std::function<Tensor(const TransferKey&)> buffers_;

  std::vector<PostedReceive> receives_;  // indexed by instruction position
  std::vector<size_t> receive_positions_;
  size_t next_receive_ = 0;       // receive_positions_[next_receive_] is the next to post
  size_t consumed_receives_ = 0;  // receives completed by their instruction, in program order
  int posted_ahead_ = 0;
  std::vector<InFlightSend> sends_;
  // Local hand-offs sent and not yet received, in send order.
  std::vector<std::pair<TransferKey, Tensor>> parked_;
  int64_t bytes_sent_ = 0;
  int64_t bytes_received_ = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_STEP_TRANSFERS_H_
