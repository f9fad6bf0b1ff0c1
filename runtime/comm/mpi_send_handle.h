// MpiSendHandle: one boundary tensor on its way to a peer: a header message, then the payload,
// both non-blocking. The handle holds a reference to the tensor until MPI is done with it;
// destroying it early cancels what it can and leaves the rest (with the tensor) to the channel.
// Internal to comm/; created by MpiDataChannel::Send. Thread-compatible.
#ifndef GPIPE_RUNTIME_COMM_MPI_SEND_HANDLE_H_
#define GPIPE_RUNTIME_COMM_MPI_SEND_HANDLE_H_

#include <mpi.h>

#include <array>
#include <memory>
#include <string>

#include "runtime/comm/data_channel.h"
#include "runtime/comm/data_channel_context.h"
#include "runtime/comm/transfer_header.h"

namespace gpipe {

class MpiSendHandle final : public TransferHandle {
 public:
  static absl::StatusOr<std::unique_ptr<MpiSendHandle>> Start(
      std::shared_ptr<DataChannelContext> context, const Tensor& tensor, int peer,
      const TransferKey& key);
  ~MpiSendHandle() override;

  bool Done() override;
  absl::Status Wait(absl::Time deadline) override;

 private:
  struct Buffers {
    Tensor tensor;
    HeaderWords header;
  };
  MpiSendHandle(std::shared_ptr<DataChannelContext> context, std::shared_ptr<Buffers> buffers,
                std::string description)
      : context_(std::move(context)),
        buffers_(std::move(buffers)),
        description_(std::move(description)) {}
  void Finish(absl::Status status);

  std::shared_ptr<DataChannelContext> context_;
  std::shared_ptr<Buffers> buffers_;
  // "rank 1 sending activation step=3 mb=5 f32[8, 256] to rank 2".
  std::string description_;
  std::array<MPI_Request, 2> requests_ = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  bool finished_ = false;
  absl::Status result_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_MPI_SEND_HANDLE_H_
