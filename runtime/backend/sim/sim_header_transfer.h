// Headers-only transfers: what SimDataChannel sends and receives, for tensors whose storage holds
// no data (a simulated device), over the MPI pieces of comm/ (DataChannelContext, the transfer
// header and tags, the polling wait). A transfer is one message under the header tag: the usual
// header (key, dtype, shape, sender), checked by the receiver exactly as MpiRecvHandle checks it,
// followed by one word, the sender's wall-clock time of posting (Unix nanoseconds). No payload
// bytes are read or written.
//
// Modelled link time: with a TransferTimeModel, a send is done no earlier than its post time
// plus the model's time for the payload's bytes, and a receive no earlier than the sender's post
// time (carried in the message) plus that time. A send keeps no reference to its tensor (nothing
// reads it), so the sender's memory drops at the send, as the memory predictor assumes of sends
// (runtime/estimate/activation_memory.h). This assumes the ranks' clocks agree (one host,
// or synchronized hosts); a receive never waits longer than the model's time after it saw the
// header, so clock skew cannot stall it. Waits poll with back-off (wait.h) until the header is
// in, then sleep to the ready time.
// Created by SimDataChannel. Thread-compatible.
#ifndef GPIPE_RUNTIME_BACKEND_SIM_SIM_HEADER_TRANSFER_H_
#define GPIPE_RUNTIME_BACKEND_SIM_SIM_HEADER_TRANSFER_H_

#include <mpi.h>

#include <array>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "runtime/comm/data_channel.h"
#include "runtime/comm/data_channel_context.h"
#include "runtime/comm/transfer_header.h"

namespace gpipe {

// How long the payload of a transfer of `bytes` bytes would take on the link.
using TransferTimeModel = std::function<absl::Duration(int64_t bytes)>;

// The header words and the post time.
using TimedHeaderWords = std::array<int64_t, kHeaderWords + 1>;

class SimHeaderSendHandle final : public TransferHandle {
 public:
  // `model` may be empty (done as soon as MPI is).
  static absl::StatusOr<std::unique_ptr<SimHeaderSendHandle>> Start(
      std::shared_ptr<DataChannelContext> context, const Tensor& tensor, int peer,
      const TransferKey& key, const TransferTimeModel& model);
  ~SimHeaderSendHandle() override;

  bool Done() override;
  absl::Status Wait(absl::Time deadline) override;

 private:
  struct Buffers {
    TimedHeaderWords words;
  };
  SimHeaderSendHandle(std::shared_ptr<DataChannelContext> context, std::shared_ptr<Buffers> buffers,
                      std::string description)
      : context_(std::move(context)),
        buffers_(std::move(buffers)),
        description_(std::move(description)) {}
  void Finish(absl::Status status);

  std::shared_ptr<DataChannelContext> context_;
  std::shared_ptr<Buffers> buffers_;
  std::string description_;
  std::array<MPI_Request, 1> request_ = {MPI_REQUEST_NULL};
  absl::Time ready_at_;
  bool finished_ = false;
  absl::Status result_;
};

class SimHeaderRecvHandle final : public TransferHandle {
 public:
  static absl::StatusOr<std::unique_ptr<SimHeaderRecvHandle>> Start(
      std::shared_ptr<DataChannelContext> context, Tensor& tensor, int peer, const TransferKey& key,
      const TransferTimeModel& model);
  ~SimHeaderRecvHandle() override;

  bool Done() override;
  absl::Status Wait(absl::Time deadline) override;

 private:
  struct Buffers {
    Tensor tensor;
    TimedHeaderWords words;
  };
  SimHeaderRecvHandle(std::shared_ptr<DataChannelContext> context, std::shared_ptr<Buffers> buffers,
                      int peer, TransferHeader expected, absl::Duration link_time);
  // Tests the receive once; when the header is in, checks it and sets ready_at_. Returns
  // whether it is in (or failed: then finished_).
  bool Arrived();
  void Finish(absl::Status status);

  std::shared_ptr<DataChannelContext> context_;
  std::shared_ptr<Buffers> buffers_;
  int peer_;
  TransferHeader expected_;
  absl::Duration link_time_;
  std::string description_;
  std::array<MPI_Request, 1> request_ = {MPI_REQUEST_NULL};
  bool arrived_ = false;
  absl::Time ready_at_;
  bool finished_ = false;
  absl::Status result_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_BACKEND_SIM_SIM_HEADER_TRANSFER_H_
