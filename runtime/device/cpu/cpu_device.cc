#include "runtime/device/cpu/cpu_device.h"

#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops/offload_copy.h"

namespace gpipe {
namespace {

// A CPU event: the monotonic time at which it was recorded (all earlier work is done then).
class CpuEvent final : public DeviceEvent {
 public:
  explicit CpuEvent(std::chrono::steady_clock::time_point at) : at_(at) {}
  std::chrono::steady_clock::time_point at() const { return at_; }

 private:
  std::chrono::steady_clock::time_point at_;
};

}  // namespace

// The ops recorded by one capture, run in order by Launch.
class CpuDevice::RecordedGraph final : public WorkGraph {
 public:
  RecordedGraph(CpuDevice& device, std::vector<RecordedOp> ops,
                std::unique_ptr<CaptureMemory::GraphHold> hold)
      : device_(device), hold_(std::move(hold)), ops_(std::move(ops)) {}

  absl::Status Launch() override {
    RETURN_IF_ERROR(device_.RefuseWhileCapturing("WorkGraph::Launch"));
    for (const RecordedOp& op : ops_) RETURN_IF_ERROR(op());
    return absl::OkStatus();
  }

 private:
  CpuDevice& device_;
  // Destroyed after ops_: the memory they view goes back once they are gone.
  const std::unique_ptr<CaptureMemory::GraphHold> hold_;
  const std::vector<RecordedOp> ops_;
};

CpuDevice::CpuDevice(CpuDeviceOptions options)
    : memory_("cpu", options.memory_limit_bytes),
      staging_("staging"),
      offload_("offload"),
      dnnl_(options.threads),
      matmul_ops_(dnnl_),
      conv_ops_(dnnl_, memory_),
      attention_ops_(dnnl_.threads(), memory_),
      ops_{.tensor = tensor_ops_,
           .matmul = matmul_ops_,
           .activation = activation_ops_,
           .norm = norm_ops_,
           .conv = conv_ops_,
           .attention = attention_ops_,
           .embedding = embedding_ops_,
           .loss = loss_ops_,
           .optimizer = optimizer_ops_},
      capture_memory_("cpu", memory_),
      recording_(ops_, views_, [this](RecordedOp op) { recorded_.push_back(std::move(op)); }) {}

absl::StatusOr<void*> CpuDevice::Allocate(int64_t bytes, MemoryKind kind) {
  if (capture_memory_.capturing()) return capture_memory_.Allocate(bytes, kind);
  return memory_.Allocate(bytes, kind);
}

void CpuDevice::Free(void* ptr, int64_t bytes, MemoryKind kind) {
  if (!capture_memory_.Free(ptr, bytes, kind)) memory_.Free(ptr, bytes, kind);
}

absl::Status CpuDevice::BeginCapture() {
  RETURN_IF_ERROR(capture_memory_.Begin());
  views_ = Tensor::UnownedViews();
  recorded_.clear();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WorkGraph>> CpuDevice::EndCapture() {
  ASSIGN_OR_RETURN(std::unique_ptr<CaptureMemory::GraphHold> hold, capture_memory_.End());
  views_ = Tensor::UnownedViews();
  return std::make_unique<RecordedGraph>(*this, std::exchange(recorded_, {}), std::move(hold));
}

absl::Status CpuDevice::RefuseWhileCapturing(const char* what) const {
  if (!capture_memory_.capturing()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "cpu: ", what, " while work is being captured (captured work never waits for the host)"));
}

void CpuDevice::Recount(int64_t bytes, MemoryKind from, MemoryKind to) {
  memory_.Recount(bytes, from, to);
}

absl::Status CpuDevice::CopyFromHost(const void* source, int64_t source_bytes,
                                     Tensor& destination) {
  RETURN_IF_ERROR(RefuseWhileCapturing("CopyFromHost"));
  if (!destination.defined() || destination.bytes() != source_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("cpu: copying ", source_bytes,
                                                   " host bytes into ", destination.DebugString()));
  }
  if (source_bytes > 0) std::memcpy(destination.raw_data(), source, source_bytes);
  return absl::OkStatus();
}

absl::Status CpuDevice::CopyToHost(const Tensor& source, void* destination,
                                   int64_t destination_bytes) {
  RETURN_IF_ERROR(RefuseWhileCapturing("CopyToHost"));
  if (!source.defined() || source.bytes() != destination_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("cpu: copying ", source.DebugString(), " into ",
                                                   destination_bytes, " host bytes"));
  }
  if (destination_bytes > 0) std::memcpy(destination, source.raw_data(), destination_bytes);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<AsyncCopy>> CpuDevice::StartCopyToHost(Tensor source,
                                                                      Tensor destination) {
  RETURN_IF_ERROR(RefuseWhileCapturing("StartCopyToHost"));
  RETURN_IF_ERROR(CheckOffloadCopy(name(), *this, offload_, source, destination));
  if (source.bytes() > 0) std::memcpy(destination.raw_data(), source.raw_data(), source.bytes());
  return std::make_unique<CompletedCopy>();
}

absl::StatusOr<std::unique_ptr<AsyncCopy>> CpuDevice::StartCopyFromHost(Tensor source,
                                                                        Tensor destination) {
  RETURN_IF_ERROR(RefuseWhileCapturing("StartCopyFromHost"));
  RETURN_IF_ERROR(CheckOffloadCopy(name(), *this, offload_, destination, source));
  if (source.bytes() > 0) std::memcpy(destination.raw_data(), source.raw_data(), source.bytes());
  return std::make_unique<CompletedCopy>();
}

absl::StatusOr<std::unique_ptr<DeviceEvent>> CpuDevice::RecordEvent() {
  RETURN_IF_ERROR(RefuseWhileCapturing("RecordEvent"));
  return std::make_unique<CpuEvent>(std::chrono::steady_clock::now());
}

absl::StatusOr<double> CpuDevice::ElapsedSeconds(const DeviceEvent& start, const DeviceEvent& end) {
  RETURN_IF_ERROR(RefuseWhileCapturing("ElapsedSeconds"));
  const auto* a = dynamic_cast<const CpuEvent*>(&start);
  const auto* b = dynamic_cast<const CpuEvent*>(&end);
  if (a == nullptr || b == nullptr) {
    return absl::InvalidArgumentError("cpu: ElapsedSeconds of an event from another device");
  }
  return std::chrono::duration<double>(b->at() - a->at()).count();
}

}  // namespace gpipe
