#include "runtime/device/sim/sim_device.h"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops/offload_copy.h"

namespace gpipe {
namespace {

constexpr uintptr_t kAlignment = 64;
// The first fake address: well away from null and from low pages.
constexpr uintptr_t kFirstAddress = uintptr_t{1} << 40;
// Timer slack of the sleeping thread: Linux lets a sleep end up to 50us late by default, which
// along a pipeline's critical path of hundreds of ops would add up to a visible error.
constexpr unsigned long kTimerSlackNs = 1000;

// A simulated event: the modelled busy time when it was recorded.
class SimEvent final : public DeviceEvent {
 public:
  explicit SimEvent(absl::Duration occupied) : occupied_(occupied) {}
  absl::Duration occupied() const { return occupied_; }

 private:
  absl::Duration occupied_;
};

// The monotonic clock as a duration since its epoch (boot).
absl::Duration MonotonicNow() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return absl::DurationFromTimespec(now);
}

// Sleeps (never spins) until the monotonic clock reads `deadline`: an absolute deadline, so
// oversleeping one wake-up is not added again by a retry after a signal, and wall-clock steps
// cannot stretch the wait.
void SleepUntil(absl::Duration deadline) {
  const timespec at = absl::ToTimespec(deadline);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) == EINTR) {
  }
}

// A modelled copy: finished once the monotonic clock passes its end. It holds its tensors (the
// simulated storage stays counted) until it is destroyed, which waits for the end as a real
// device's copy would be waited for.
class SimCopy final : public AsyncCopy {
 public:
  SimCopy(Tensor source, Tensor destination, absl::Duration end)
      : source_(std::move(source)), destination_(std::move(destination)), end_(end) {}
  SimCopy(const SimCopy&) = delete;
  SimCopy& operator=(const SimCopy&) = delete;
  ~SimCopy() override {
    if (MonotonicNow() < end_) SleepUntil(end_);
  }
  absl::StatusOr<bool> Finished() override { return MonotonicNow() >= end_; }
  absl::Status OrderComputeAfter() override {
    if (MonotonicNow() < end_) SleepUntil(end_);
    return absl::OkStatus();
  }

 private:
  Tensor source_;
  Tensor destination_;
  absl::Duration end_;
};

}  // namespace

SimMemory::SimMemory(const char* label, int64_t limit_bytes)
    : label_(label), limit_bytes_(limit_bytes), next_address_(kFirstAddress) {}

SimDevice::SimDevice(SimDeviceOptions options)
    : options_(options),
      memory_("sim", options.memory_limit_bytes),
      ops_{.tensor = tensor_ops_,
           .matmul = matmul_ops_,
           .activation = activation_ops_,
           .norm = norm_ops_,
           .conv = conv_ops_,
           .attention = attention_ops_,
           .embedding = embedding_ops_,
           .loss = loss_ops_,
           .optimizer = optimizer_ops_} {
  prctl(PR_SET_TIMERSLACK, kTimerSlackNs, 0, 0, 0);  // best effort: only precision suffers
}

absl::StatusOr<void*> SimMemory::Allocate(int64_t bytes, MemoryKind kind) {
  if (bytes < 0) return absl::InvalidArgumentError("negative allocation size");
  if (limit_bytes_ > 0 && memory_.current() + bytes > limit_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        label_, ": allocating ", bytes, " bytes (", MemoryKindName(kind), ") exceeds the limit of ",
        limit_bytes_, " bytes (", memory_.current(), " in use)"));
  }
  // Address space is never reused, so live allocations never overlap; 2^64 bytes of it last.
  const uintptr_t rounded =
      bytes == 0 ? kAlignment
                 : ((static_cast<uintptr_t>(bytes) + kAlignment - 1) / kAlignment) * kAlignment;
  const uintptr_t address = next_address_.fetch_add(rounded, std::memory_order_relaxed);
  memory_.Allocated(kind, bytes);
  return reinterpret_cast<void*>(address);
}

void SimMemory::Free(void* /*ptr*/, int64_t bytes, MemoryKind kind) { memory_.Freed(kind, bytes); }

void SimMemory::Recount(int64_t bytes, MemoryKind from, MemoryKind to) {
  memory_.Moved(from, to, bytes);
}

absl::Status SimDevice::CopyFromHost(const void* /*source*/, int64_t source_bytes,
                                     Tensor& destination) {
  if (!destination.defined() || destination.bytes() != source_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("sim: copying ", source_bytes,
                                                   " host bytes into ", destination.DebugString()));
  }
  return absl::OkStatus();
}

absl::Status SimDevice::CopyToHost(const Tensor& source, void* destination,
                                   int64_t destination_bytes) {
  if (!source.defined() || source.bytes() != destination_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("sim: copying ", source.DebugString(), " into ",
                                                   destination_bytes, " host bytes"));
  }
  std::memset(destination, 0, destination_bytes);
  return absl::OkStatus();
}

absl::Duration SimDevice::ScheduleCopy(int64_t bytes, absl::Duration& engine_free) const {
  const absl::Duration start = std::max(MonotonicNow(), engine_free);
  engine_free = start + absl::Seconds(static_cast<double>(bytes) / (options_.host_link_gbps * 1e9));
  return engine_free;
}

absl::StatusOr<std::unique_ptr<AsyncCopy>> SimDevice::StartCopyToHost(Tensor source,
                                                                      Tensor destination) {
  RETURN_IF_ERROR(CheckOffloadCopy(name(), *this, offload_, source, destination));
  const absl::Duration end = ScheduleCopy(source.bytes(), to_host_free_);
  return std::make_unique<SimCopy>(std::move(source), std::move(destination), end);
}

absl::StatusOr<std::unique_ptr<AsyncCopy>> SimDevice::StartCopyFromHost(Tensor source,
                                                                        Tensor destination) {
  RETURN_IF_ERROR(CheckOffloadCopy(name(), *this, offload_, destination, source));
  const absl::Duration end = ScheduleCopy(source.bytes(), from_host_free_);
  return std::make_unique<SimCopy>(std::move(source), std::move(destination), end);
}

absl::StatusOr<std::unique_ptr<DeviceEvent>> SimDevice::RecordEvent() {
  return std::make_unique<SimEvent>(occupied_);
}

absl::StatusOr<double> SimDevice::ElapsedSeconds(const DeviceEvent& start, const DeviceEvent& end) {
  const auto* a = dynamic_cast<const SimEvent*>(&start);
  const auto* b = dynamic_cast<const SimEvent*>(&end);
  if (a == nullptr || b == nullptr) {
    return absl::InvalidArgumentError("sim: ElapsedSeconds of an event from another device");
  }
  return absl::ToDoubleSeconds(b->occupied() - a->occupied());
}

absl::Status SimDevice::Occupy(absl::Duration duration) {
  if (duration < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sim: negative op duration ", absl::FormatDuration(duration)));
  }
  occupied_ += duration;
  if (duration == absl::ZeroDuration()) return absl::OkStatus();
  SleepUntil(MonotonicNow() + duration);
  return absl::OkStatus();
}

}  // namespace gpipe
