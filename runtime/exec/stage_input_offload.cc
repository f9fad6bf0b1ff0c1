#include "runtime/exec/stage_input_offload.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<StageInputOffload::Piece> StageInputOffload::StartCopyOut(int skip_layer,
                                                                         Tensor tensor) {
  Piece piece{.skip_layer = skip_layer};
  ASSIGN_OR_RETURN(piece.host, Tensor::Empty(device_.offload_host(), tensor.shape(), tensor.dtype(),
                                             tensor.memory_kind()));
  ASSIGN_OR_RETURN(piece.out, device_.StartCopyToHost(tensor, piece.host));
  piece.device = std::move(tensor);
  return piece;
}

absl::Status StageInputOffload::Park(int chunk, int m, StageInputs inputs) {
  if (!inputs.input.defined()) {
    return absl::FailedPreconditionError(
        absl::StrCat("micro-batch ", m, " (chunk ", chunk, ") has no stage input to offload"));
  }
  if (parked_.contains({chunk, m})) {
    return absl::FailedPreconditionError(
        absl::StrCat("micro-batch ", m, " (chunk ", chunk, ")'s stage input is already offloaded"));
  }
  Parked parked;
  parked.pieces.reserve(1 + inputs.skips.size());
  int64_t bytes = inputs.input.bytes();
  ASSIGN_OR_RETURN(Piece input, StartCopyOut(-1, std::move(inputs.input)));
  parked.pieces.push_back(std::move(input));
  for (auto& [layer, skip] : inputs.skips) {
    if (!skip.defined()) {
      return absl::FailedPreconditionError(absl::StrCat("micro-batch ", m, " (chunk ", chunk,
                                                        ") has no skip input for layer ", layer));
    }
    bytes += skip.bytes();
    ASSIGN_OR_RETURN(Piece piece, StartCopyOut(layer, std::move(skip)));
    parked.pieces.push_back(std::move(piece));
  }
  offloaded_bytes_ += bytes;
  parked_.emplace(std::make_pair(chunk, m), std::move(parked));
  return Poll();
}

absl::StatusOr<StageInputOffload::Parked*> StageInputOffload::Find(int chunk, int m,
                                                                   const char* what) {
  const auto it = parked_.find({chunk, m});
  if (it == parked_.end() || it->second.taken) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot ", what, " micro-batch ", m, " (chunk ", chunk,
                     ")'s stage input: it is not in host memory (",
                     it == parked_.end() ? "never offloaded" : "already taken back", ")"));
  }
  return &it->second;
}

absl::Status StageInputOffload::StartCopyBack(Piece& piece) {
  if (piece.device.defined()) {
    // The copy out is still running: the tensor has not left the device.
    piece.restored = piece.device;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(piece.restored, Tensor::Empty(device_, piece.host.shape(), piece.host.dtype(),
                                                 piece.host.memory_kind()));
  ASSIGN_OR_RETURN(piece.in, device_.StartCopyFromHost(piece.host, piece.restored));
  // On the CPU the copy is done: its host memory goes at once.
  return Release(piece).status();
}

absl::Status StageInputOffload::StartRestore(int chunk, int m) {
  ASSIGN_OR_RETURN(Parked * parked, Find(chunk, m, "restore"));
  if (parked->restoring) return absl::OkStatus();
  parked->restoring = true;
  for (Piece& piece : parked->pieces) RETURN_IF_ERROR(StartCopyBack(piece));
  return absl::OkStatus();
}

absl::StatusOr<StageInputs> StageInputOffload::Take(int chunk, int m) {
  RETURN_IF_ERROR(StartRestore(chunk, m));
  ASSIGN_OR_RETURN(Parked * parked, Find(chunk, m, "take back"));
  StageInputs inputs;
  for (Piece& piece : parked->pieces) {
    if (piece.in != nullptr) {
      const absl::Time begin = absl::Now();
      RETURN_IF_ERROR(piece.in->OrderComputeAfter());
      waited_ += absl::Now() - begin;
    }
    Tensor restored = std::exchange(piece.restored, Tensor());
    piece.device = Tensor();  // the copy out holds it while it runs
    if (piece.skip_layer < 0) {
      inputs.input = std::move(restored);
    } else {
      inputs.skips.emplace(piece.skip_layer, std::move(restored));
    }
  }
  parked->taken = true;
  RETURN_IF_ERROR(Poll());
  return inputs;
}

absl::StatusOr<bool> StageInputOffload::Release(Piece& piece) {
  if (piece.out != nullptr) {
    ASSIGN_OR_RETURN(const bool finished, piece.out->Finished());
    if (finished) {
      piece.out.reset();
      piece.device = Tensor();
    }
  }
  if (piece.in != nullptr) {
    ASSIGN_OR_RETURN(const bool finished, piece.in->Finished());
    if (finished) {
      piece.in.reset();
      piece.host = Tensor();
    }
  }
  return piece.out == nullptr && piece.in == nullptr;
}

absl::Status StageInputOffload::Poll() {
  for (auto it = parked_.begin(); it != parked_.end();) {
    bool idle = true;
    for (Piece& piece : it->second.pieces) {
      ASSIGN_OR_RETURN(const bool done, Release(piece));
      idle = idle && done;
    }
    if (it->second.taken && idle) {
      it = parked_.erase(it);
    } else {
      ++it;
    }
  }
  return absl::OkStatus();
}

absl::Status StageInputOffload::Finish() {
  for (const auto& [slot, parked] : parked_) {
    if (!parked.taken) {
      return absl::InternalError(absl::StrCat("micro-batch ", slot.second, " (chunk ", slot.first,
                                              ")'s stage input is still in host memory at the "
                                              "end of the step (no backward took it back)"));
    }
  }
  parked_.clear();  // each unfinished copy waits for itself
  return absl::OkStatus();
}

}  // namespace gpipe
