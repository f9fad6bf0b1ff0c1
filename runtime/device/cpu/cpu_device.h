// CpuDevice: the reference backend. Host memory from the C++ heap (64-byte aligned), every byte
// counted; kernels are the Cpu*Ops families: matmul and convolution through oneDNN primitives,
// the rest vectorizable loops. A fixed thread count (1 by default) keeps results deterministic
// and lets K processes share the cores fairly. Work runs at once on the calling thread, so
// streams, events and Synchronize are trivial; events read the monotonic clock. While a capture
// is open (Device::BeginCapture) ops are recorded instead and run at WorkGraph::Launch.
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_DEVICE_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/host_allocator.h"
#include "runtime/device/capture_memory.h"
#include "runtime/device/cpu/cpu_activation_ops.h"
#include "runtime/device/cpu/cpu_attention_ops.h"
#include "runtime/device/cpu/cpu_conv_ops.h"
#include "runtime/device/cpu/cpu_embedding_ops.h"
#include "runtime/device/cpu/cpu_loss_ops.h"
#include "runtime/device/cpu/cpu_matmul_ops.h"
#include "runtime/device/cpu/cpu_norm_ops.h"
#include "runtime/device/cpu/cpu_optimizer_ops.h"
#include "runtime/device/cpu/cpu_tensor_ops.h"
#include "runtime/device/cpu/dnnl_context.h"
#include "runtime/device/device.h"
#include "runtime/device/ops.h"
#include "runtime/device/recording_ops.h"

namespace gpipe {

struct CpuDeviceOptions {
  // Compute threads (oneDNN's pool).
  int threads = 1;
  // Allocations beyond this many bytes in total fail with RESOURCE_EXHAUSTED (0: no limit).
  int64_t memory_limit_bytes = 0;
};

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(CpuDeviceOptions options = {});
  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  absl::StatusOr<void*> Allocate(int64_t bytes, MemoryKind kind) override;
  void Free(void* ptr, int64_t bytes, MemoryKind kind) override;
  void Recount(int64_t bytes, MemoryKind from, MemoryKind to) override;
  bool host_accessible() const override { return true; }

  std::string name() const override { return "cpu"; }
  MemoryTracker& memory() override { return memory_.memory(); }
  Allocator& host_staging() override { return staging_; }
  const Ops& ops() override { return capture_memory_.capturing() ? recording_.ops() : ops_; }

  absl::Status CopyFromHost(const void* source, int64_t source_bytes, Tensor& destination) override;
  absl::Status CopyToHost(const Tensor& source, void* destination,
                          int64_t destination_bytes) override;
  // A host arena of its own, so the device's memory drops by what moved there.
  Allocator& offload_host() override { return offload_; }
  MemoryTracker& offload_memory() override { return offload_.memory(); }
  // Plain copies, done when the call returns.
  absl::StatusOr<std::unique_ptr<AsyncCopy>> StartCopyToHost(Tensor source,
                                                             Tensor destination) override;
  absl::StatusOr<std::unique_ptr<AsyncCopy>> StartCopyFromHost(Tensor source,
                                                               Tensor destination) override;
  absl::StatusOr<std::unique_ptr<DeviceEvent>> RecordEvent() override;
  absl::StatusOr<double> ElapsedSeconds(const DeviceEvent& start, const DeviceEvent& end) override;
  absl::Status Synchronize() override { return RefuseWhileCapturing("Synchronize"); }
  // Captured ops are recorded (RecordingOps: checked now, run at Launch with views of their
  // tensors) in the device's capture memory; see Device::BeginCapture.
  absl::Status BeginCapture() override;
  absl::StatusOr<std::unique_ptr<WorkGraph>> EndCapture() override;

 private:
  class RecordedGraph;

  // FAILED_PRECONDITION naming `what` while a capture is open.
  absl::Status RefuseWhileCapturing(const char* what) const;

  HostAllocator memory_;
  HostAllocator staging_;
  HostAllocator offload_;
  DnnlContext dnnl_;
  CpuTensorOps tensor_ops_;
  CpuMatmulOps matmul_ops_;
  CpuActivationOps activation_ops_;
  CpuNormOps norm_ops_;
  CpuConvOps conv_ops_;
  CpuAttentionOps attention_ops_;
  CpuEmbeddingOps embedding_ops_;
  CpuLossOps loss_ops_;
  CpuOptimizerOps optimizer_ops_;
  Ops ops_;
  CaptureMemory capture_memory_;
  Tensor::UnownedViews views_;        // the open capture's
  std::vector<RecordedOp> recorded_;  // the open capture's ops, in order
  RecordingOps recording_;            // ops() while a capture is open
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_DEVICE_H_
