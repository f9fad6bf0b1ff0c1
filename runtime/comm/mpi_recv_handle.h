// MpiRecvHandle: one boundary tensor coming from a peer. The header receive is posted up front;
// the payload receive (straight into the destination tensor) only once the header has arrived
// and matches the expected key, dtype and shape, so a sender of a larger tensor can never write
// past the destination (Open MPI's shared-memory single-copy path does not enforce truncation).
// A mismatch names both sides. When
// nothing arrives by the deadline, a header the peer sent with another micro-batch of the same
// kind is reported as the mismatch it is. Holds the tensor until MPI is done with it.
// Internal to comm/; created by MpiDataChannel::Recv. Thread-compatible.
#ifndef GPIPE_RUNTIME_COMM_MPI_RECV_HANDLE_H_
#define GPIPE_RUNTIME_COMM_MPI_RECV_HANDLE_H_

#include <mpi.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/comm/data_channel.h"
#include "runtime/comm/data_channel_context.h"
#include "runtime/comm/transfer_header.h"

namespace gpipe {

class MpiRecvHandle final : public TransferHandle {
 public:
  static absl::StatusOr<std::unique_ptr<MpiRecvHandle>> Start(
      std::shared_ptr<DataChannelContext> context, Tensor& tensor, int peer,
      const TransferKey& key);
  ~MpiRecvHandle() override;

  bool Done() override;
  absl::Status Wait(absl::Time deadline) override;
  // One non-blocking poll (DataChannelContext::ProgressPendingReceives calls it).
  void Poll();

 private:
  static constexpr int kHeader = 0;
  static constexpr int kPayload = 1;
  struct Buffers {
    Tensor tensor;
    HeaderWords header;
    std::vector<char> drain;  // a mismatched transfer's payload, received and discarded
  };
  MpiRecvHandle(std::shared_ptr<DataChannelContext> context, std::shared_ptr<Buffers> buffers,
                int peer, TransferHeader expected);

  // Tests the receives once, posting the payload receive when a matching header arrived;
  // records per-receive errors; true when nothing is left to do.
  bool Progress();
  // The verdict once both receives finished.
  absl::Status Evaluate();
  // Receives and discards the payload a mismatched header announced.
  void PostDrain();
  // The header-mismatch error if a header arrived and disagrees with the expectation.
  std::optional<absl::Status> HeaderMismatch(const std::string& note);
  // At a deadline: a header the peer sent for another micro-batch of this kind and chunk.
  std::optional<TransferHeader> ProbeStrayHeader();
  absl::Status MismatchError(const TransferHeader& received, const std::string& note) const;
  void Finish(absl::Status status);

  std::shared_ptr<DataChannelContext> context_;
  std::shared_ptr<Buffers> buffers_;
  int peer_;
  TransferHeader expected_;
  // "rank 2 receiving activation step=3 mb=5 f32[8, 256] from rank 1".
  std::string description_;
  std::array<MPI_Request, 2> requests_ = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  std::array<MPI_Status, 2> statuses_{};
  std::array<absl::Status, 2> errors_;
  int payload_tag_ = 0;
  bool payload_posted_ = false;
  // Set when the header arrived and disagrees with the expectation: its payload is then drained
  // into Buffers::drain (so the sender completes) and never touches the tensor.
  std::optional<absl::Status> mismatch_;
  bool finished_ = false;
  absl::Status result_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_MPI_RECV_HANDLE_H_
