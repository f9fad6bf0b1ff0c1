#include "runtime/exec/step_transfers.h"

#include <variant>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {
namespace {

bool IsReceive(const schedule::Instruction& instruction) {
  return std::holds_alternative<schedule::RecvActivation>(instruction) ||
         std::holds_alternative<schedule::RecvGrad>(instruction) ||
         std::holds_alternative<schedule::RecvSkip>(instruction) ||
         std::holds_alternative<schedule::RecvSkipGrad>(instruction);
}

// What a receive brings: its per-sample shape, its kind and the rank that sends it; the skip
// layer is -1 for the pipeline's own boundary.
struct Incoming {
  Shape per_sample;
  TransferKind kind = TransferKind::kActivation;
  int peer = -1;
  int skip_layer = -1;
};

absl::StatusOr<Incoming> IncomingOf(const ExecutorConfig& config, const StageModel& model,
                                    const schedule::Instruction& instruction) {
  const int chunk = schedule::ChunkOf(instruction);
  if (const std::optional<int> layer = schedule::SkipLayerOf(instruction)) {
    const bool forward = std::holds_alternative<schedule::RecvSkip>(instruction);
    const int peer = config.SkipPeerRank(*layer);
    if (peer < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", config.stage, " has no skip connection into layer ", *layer));
    }
    if (forward) {
      if (!model.Holds(*layer) ||
          model.layer(*layer - model.global_index(0)).skip_join() == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer ", *layer, " is no skip join of chunk ", chunk));
      }
      return Incoming{model.layer(*layer - model.global_index(0)).skip_join()->skip_shape(),
                      TransferKind::kActivation, peer, *layer};
    }
    for (const SkipEdge& edge : model.sent_skips()) {
      if (edge.join == *layer) {
        return Incoming{model.layer(edge.producer - model.global_index(0)).output_shape(),
                        TransferKind::kGradient, peer, *layer};
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("chunk ", chunk, " sends no output to layer ", *layer));
  }
  const bool activation = std::holds_alternative<schedule::RecvActivation>(instruction);
  const int peer = config.NeighbourRank(chunk, /*next=*/!activation);
  if (peer < 0) {
    return absl::InvalidArgumentError(absl::StrCat("stage ", config.stage, " has no ",
                                                   activation ? "previous" : "next",
                                                   " stage to receive from"));
  }
  return Incoming{activation ? model.input_shape() : model.output_shape(),
                  activation ? TransferKind::kActivation : TransferKind::kGradient, peer, -1};
}

}  // namespace

StepTransfers::StepTransfers(const StepScope& scope, const schedule::StageProgram& program,
                             const ExecutorResources& resources, const MicroBatchStates& states,
                             int64_t micro_batch_size)
    : scope_(scope),
      program_(program),
      res_(resources),
      states_(states),
      micro_batch_size_(micro_batch_size),
      receives_(program.instructions.size()) {
  for (size_t i = 0; i < program_.instructions.size(); ++i) {
    if (IsReceive(program_.instructions[i])) receive_positions_.push_back(i);
  }
}

absl::Status StepTransfers::PostReceivesUpTo(int count) {
  while (next_receive_ < receive_positions_.size() && posted_ahead_ < count) {
    RETURN_IF_ERROR(PostNextReceive());
  }
  return absl::OkStatus();
}

absl::Status StepTransfers::PostNextReceive() {
  const size_t position = receive_positions_[next_receive_];
  const absl::Status posted = PostReceive(position);
  if (!posted.ok()) {
    return WithContext(
        posted, absl::StrCat("posting ", schedule::ToString(program_.instructions[position])));
  }
  ++next_receive_;
  ++posted_ahead_;
  return absl::OkStatus();
}

absl::Status StepTransfers::PostReceive(size_t position) {
  const ExecutorConfig& config = scope_.config();
  const schedule::Instruction& instruction = program_.instructions[position];
  const int m = *schedule::MicroBatchOf(instruction);
  const int chunk = schedule::ChunkOf(instruction);
  RETURN_IF_ERROR(states_.Check(chunk, m));
  ASSIGN_OR_RETURN(const Incoming incoming,
                   IncomingOf(config, *res_.chunks[chunk].model, instruction));
  const bool activation = incoming.kind == TransferKind::kActivation;
  const int peer = incoming.peer;
  const Shape& per_sample = incoming.per_sample;
  PostedReceive& posted = receives_[position];
  // Transfers are keyed by the receiving side's chunk (the sender translates).
  posted.key = TransferKey{.step = scope_.command().step(),
                           .micro_batch = m,
                           .chunk = chunk,
                           .kind = incoming.kind,
                           .skip_layer = incoming.skip_layer};
  posted.chunk = chunk;
  posted.peer = peer;
  posted.posted_ns = scope_.TraceNow();
  posted.posted = true;
  if (peer == config.rank) {  // a local hand-off: CompleteReceive takes the parked tensor
    posted.local = true;
    return absl::OkStatus();
  }
  const Shape shape = per_sample.WithBatch(micro_batch_size_);
  if (buffers_) posted.buffer = buffers_(posted.key);
  if (!posted.buffer.defined() || posted.buffer.shape() != shape ||
      posted.buffer.dtype() != config.boundary_dtype) {
    ASSIGN_OR_RETURN(posted.buffer,
                     Tensor::Empty(res_.device, shape, config.boundary_dtype,
                                   activation ? MemoryKind::kBoundary : MemoryKind::kBoundaryGrad));
  }
  ASSIGN_OR_RETURN(posted.handle, res_.channel.Recv(posted.buffer, peer, posted.key));
  return absl::OkStatus();
}

void StepTransfers::PollPostedReceives() {
  for (size_t i = consumed_receives_; i < next_receive_; ++i) {
    PostedReceive& posted = receives_[receive_positions_[i]];
    if (posted.handle && posted.handle->Done() && posted.done_ns < 0) {
      posted.done_ns = scope_.TraceNow();
    }
  }
}

absl::StatusOr<Tensor> StepTransfers::CompleteReceive(size_t position) {
  // Not posted yet when the lookahead is exhausted: post everything up to and including it.
  while (!receives_[position].posted && next_receive_ < receive_positions_.size()) {
    RETURN_IF_ERROR(PostNextReceive());
  }
  if (!receives_[position].posted) {
    return absl::InternalError("no receive was posted for this instruction");
  }
  PostedReceive posted = std::move(receives_[position]);
  --posted_ahead_;
  ++consumed_receives_;
  if (posted.local) {
    ASSIGN_OR_RETURN(posted.buffer, TakeParked(posted.key));
    posted.done_ns = scope_.TraceNow();
  } else {
    RETURN_IF_ERROR(posted.handle->Wait(scope_.Deadline()));
    bytes_received_ += posted.buffer.bytes();
  }
  scope_.RecordTransfer(posted.key.skip_layer >= 0 ? TraceKind::kTransferSkipIn
                        : posted.key.kind == TransferKind::kActivation
                            ? TraceKind::kTransferActivationIn
                            : TraceKind::kTransferGradIn,
                        posted.key, posted.chunk, posted.peer, posted.buffer.bytes(),
                        posted.posted_ns, posted.done_ns);
  RETURN_IF_ERROR(PostReceivesUpTo(scope_.config().recv_lookahead));
  return std::move(posted.buffer);
}

absl::Status StepTransfers::StartSend(Tensor tensor, int peer, const TransferKey& key, int chunk) {
  if (peer < 0) {
    return absl::InvalidArgumentError(absl::StrCat("stage ", scope_.config().stage,
                                                   " has no peer to send ", ToString(key), " to"));
  }
  const int64_t posted_ns = scope_.TraceNow();
  ASSIGN_OR_RETURN(tensor, ToWire(std::move(tensor)));
  const int64_t bytes = tensor.bytes();
  if (peer == scope_.config().rank) {  // a local hand-off, complete at once
    const MemoryKind kind =
        key.kind == TransferKind::kActivation ? MemoryKind::kBoundary : MemoryKind::kBoundaryGrad;
    if (key.skip_layer >= 0 && key.kind == TransferKind::kActivation) {
      // A skip output is also the producer's output, which the layers after it keep: the
      // parked copy is boundary memory of its own, as a received one would be.
      ASSIGN_OR_RETURN(Tensor copy,
                       Tensor::Empty(res_.device, tensor.shape(), tensor.dtype(), kind));
      RETURN_IF_ERROR(res_.device.ops().tensor.Copy(tensor, copy));
      tensor = std::move(copy);
    }
    tensor.Retag(kind);
    parked_.emplace_back(key, std::move(tensor));
    RecordSend({key, nullptr, chunk, peer, bytes, posted_ns});
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(auto handle, res_.channel.Send(tensor, peer, key));
  sends_.push_back({key, std::move(handle), chunk, peer, bytes, posted_ns});
  bytes_sent_ += bytes;
  return absl::OkStatus();
}

absl::StatusOr<Tensor> StepTransfers::ToWire(Tensor tensor) const {
  // Narrow on the wire (training.precision BF16): the values are already bf16 values.
  const DType wire = scope_.config().boundary_dtype;
  if (tensor.dtype() != DType::kF32 || wire == DType::kF32) return tensor;
  ASSIGN_OR_RETURN(Tensor narrow,
                   Tensor::Empty(res_.device, tensor.shape(), wire, tensor.memory_kind()));
  RETURN_IF_ERROR(res_.device.ops().tensor.Cast(tensor, narrow));
  return narrow;
}

absl::StatusOr<Tensor> StepTransfers::TakeParked(const TransferKey& key) {
  for (auto it = parked_.begin(); it != parked_.end(); ++it) {
    const TransferKey& parked = it->first;
    if (parked.step != key.step || parked.micro_batch != key.micro_batch ||
        parked.chunk != key.chunk || parked.kind != key.kind ||
        parked.skip_layer != key.skip_layer) {
      continue;
    }
    Tensor tensor = std::move(it->second);
    parked_.erase(it);
    return tensor;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("the local hand-off of ", ToString(key),
                   " from this rank's other chunk has not been sent; the schedule must run the "
                   "sending chunk's instruction first"));
}

void StepTransfers::RecordSend(const InFlightSend& send) const {
  scope_.RecordTransfer(send.key.skip_layer >= 0 ? TraceKind::kTransferSkipOut
                        : send.key.kind == TransferKind::kActivation
                            ? TraceKind::kTransferActivationOut
                            : TraceKind::kTransferGradOut,
                        send.key, send.chunk, send.peer, send.bytes, send.posted_ns);
}

absl::Status StepTransfers::ReapFinishedSends() {
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (!it->handle->Done()) {
      ++it;
      continue;
    }
    RETURN_IF_ERROR(WithContext(it->handle->Wait(scope_.Deadline()),
                                absl::StrCat("sending ", ToString(it->key))));
    RecordSend(*it);
    it = sends_.erase(it);
  }
  return absl::OkStatus();
}

absl::Status StepTransfers::WaitForSends() {
  for (InFlightSend& send : sends_) {
    RETURN_IF_ERROR(WithContext(send.handle->Wait(scope_.Deadline()),
                                absl::StrCat("sending ", ToString(send.key))));
    RecordSend(send);
  }
  sends_.clear();
  return absl::OkStatus();
}

}  // namespace gpipe
