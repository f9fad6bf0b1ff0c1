#include "runtime/exec/stage_input_offload.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::Status StageInputOffload::Park(int chunk, int m, Tensor input) {
  if (!input.defined()) {
    return absl::FailedPreconditionError(
        absl::StrCat("micro-batch ", m, " (chunk ", chunk, ") has no stage input to offload"));
  }
  if (parked_.contains({chunk, m})) {
    return absl::FailedPreconditionError(
        absl::StrCat("micro-batch ", m, " (chunk ", chunk, ")'s stage input is already offloaded"));
  }
  ASSIGN_OR_RETURN(Tensor host, Tensor::Empty(device_.offload_host(), input.shape(), input.dtype(),
                                              input.memory_kind()));
  ASSIGN_OR_RETURN(std::unique_ptr<AsyncCopy> out, device_.StartCopyToHost(input, host));
  offloaded_bytes_ += input.bytes();
  Parked& parked = parked_[{chunk, m}];
  parked.device = std::move(input);
  parked.host = std::move(host);
  parked.out = std::move(out);
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

absl::Status StageInputOffload::StartRestore(int chunk, int m) {
  ASSIGN_OR_RETURN(Parked * parked, Find(chunk, m, "restore"));
  if (parked->restoring) return absl::OkStatus();
  parked->restoring = true;
  if (parked->device.defined()) {
    // The copy out is still running: the input has not left the device.
    parked->restored = parked->device;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(parked->restored,
                   Tensor::Empty(device_, parked->host.shape(), parked->host.dtype(),
                                 parked->host.memory_kind()));
  ASSIGN_OR_RETURN(parked->in, device_.StartCopyFromHost(parked->host, parked->restored));
  return Release(*parked);  // on the CPU the copy is done: its host memory goes at once
}

absl::StatusOr<Tensor> StageInputOffload::Take(int chunk, int m) {
  RETURN_IF_ERROR(StartRestore(chunk, m));
  ASSIGN_OR_RETURN(Parked * parked, Find(chunk, m, "take back"));
  if (parked->in != nullptr) {
    const absl::Time begin = absl::Now();
    RETURN_IF_ERROR(parked->in->OrderComputeAfter());
    waited_ += absl::Now() - begin;
  }
  parked->taken = true;
  Tensor restored = std::move(parked->restored);
  parked->restored = Tensor();
  parked->device = Tensor();  // the copy out holds it while it runs
  RETURN_IF_ERROR(Poll());
  return restored;
}

absl::Status StageInputOffload::Release(Parked& parked) {
  if (parked.out != nullptr) {
    ASSIGN_OR_RETURN(const bool finished, parked.out->Finished());
    if (finished) {
      parked.out.reset();
      parked.device = Tensor();
    }
  }
  if (parked.in != nullptr) {
    ASSIGN_OR_RETURN(const bool finished, parked.in->Finished());
    if (finished) {
      parked.in.reset();
      parked.host = Tensor();
    }
  }
  return absl::OkStatus();
}

absl::Status StageInputOffload::Poll() {
  for (auto it = parked_.begin(); it != parked_.end();) {
    RETURN_IF_ERROR(Release(it->second));
    const Parked& parked = it->second;
    if (parked.taken && parked.out == nullptr && parked.in == nullptr) {
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
