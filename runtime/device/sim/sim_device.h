// SimDevice: a simulated accelerator. Its memory holds no data: Allocate hands out distinct,
// aligned fake addresses (nothing is reserved, so a 16 GiB model costs no RAM) while counting
// every byte exactly as CpuDevice does, limit included, so memory accounting and
// RESOURCE_EXHAUSTED behave as on a real device. Its ops compute nothing (sim_ops.h); instead the
// simulated ops (sim_layer.h, sim_loss.h, sim_optimizer.h) call Occupy, which sleeps for the
// op's modelled time, so many simulated devices share a few cores. Its offload host memory is
// simulated the same way, and its offload copies run on a modelled copy engine per direction:
// a copy of B bytes starts when the engine is free (one copy at a time) and ends B /
// host_link_gbps later, while the compute goes on; OrderComputeAfter sleeps until it ends.
//
// Thread-compatibility: as Device (memory() is thread-safe; so is Allocate, which only bumps an
// atomic counter and the tracker).
#ifndef GPIPE_RUNTIME_DEVICE_SIM_SIM_DEVICE_H_
#define GPIPE_RUNTIME_DEVICE_SIM_SIM_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "runtime/core/host_allocator.h"
#include "runtime/device/device.h"
#include "runtime/device/ops.h"
#include "runtime/device/sim/sim_ops.h"

namespace gpipe {

struct SimDeviceOptions {
  // Allocations beyond this many bytes in total fail with RESOURCE_EXHAUSTED (0: no limit).
  int64_t memory_limit_bytes = 0;
  // Offload copies' bandwidth in 10^9 bytes per second (runtime.sim.host_link_gbps); > 0.
  double host_link_gbps = 25;
};

// Simulated memory: distinct fake addresses, every byte counted, an optional limit.
class SimMemory final : public Allocator {
 public:
  // `label` ("sim", "sim offload") starts error messages; `limit_bytes` 0: no limit.
  SimMemory(const char* label, int64_t limit_bytes);
  SimMemory(const SimMemory&) = delete;
  SimMemory& operator=(const SimMemory&) = delete;

  // A fake address, 64-byte aligned, distinct from every other live allocation's; never
  // dereference it (host_accessible() is false, so Tensor refuses host access paths).
  absl::StatusOr<void*> Allocate(int64_t bytes, MemoryKind kind) override;
  void Free(void* ptr, int64_t bytes, MemoryKind kind) override;
  void Recount(int64_t bytes, MemoryKind from, MemoryKind to) override;
  bool host_accessible() const override { return false; }

  MemoryTracker& memory() { return memory_; }

 private:
  const char* label_;
  int64_t limit_bytes_;
  MemoryTracker memory_;
  // Next fake address; starts far from null so no fake pointer compares equal to nullptr.
  std::atomic<uintptr_t> next_address_;
};

class SimDevice final : public Device {
 public:
  explicit SimDevice(SimDeviceOptions options = {});
  SimDevice(const SimDevice&) = delete;
  SimDevice& operator=(const SimDevice&) = delete;

  // SimMemory's.
  absl::StatusOr<void*> Allocate(int64_t bytes, MemoryKind kind) override {
    return memory_.Allocate(bytes, kind);
  }
  void Free(void* ptr, int64_t bytes, MemoryKind kind) override { memory_.Free(ptr, bytes, kind); }
  void Recount(int64_t bytes, MemoryKind from, MemoryKind to) override {
    memory_.Recount(bytes, from, to);
  }
  bool host_accessible() const override { return false; }

  std::string name() const override { return "sim"; }
  MemoryTracker& memory() override { return memory_.memory(); }
  const Ops& ops() override { return ops_; }
  Allocator& host_staging() override { return staging_; }
  // Nothing to copy: accepted when the sizes match.
  absl::Status CopyFromHost(const void* source, int64_t source_bytes, Tensor& destination) override;
  // A simulated device holds no values: they read as zeros (a simulated step's loss is 0 and
  // its finite check passes). The coordinator refuses weight files for SIM plans.
  absl::Status CopyToHost(const Tensor& source, void* destination,
                          int64_t destination_bytes) override;
  // A simulated arena of its own (SimMemory), counted apart.
  Allocator& offload_host() override { return offload_; }
  MemoryTracker& offload_memory() override { return offload_.memory(); }
  // Modelled on the copy engine of the copy's direction (see above).
  absl::StatusOr<std::unique_ptr<AsyncCopy>> StartCopyToHost(Tensor source,
                                                             Tensor destination) override;
  absl::StatusOr<std::unique_ptr<AsyncCopy>> StartCopyFromHost(Tensor source,
                                                               Tensor destination) override;
  // Events carry the modelled busy time (occupied()) at their recording.
  absl::StatusOr<std::unique_ptr<DeviceEvent>> RecordEvent() override;
  absl::StatusOr<double> ElapsedSeconds(const DeviceEvent& start, const DeviceEvent& end) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }

  // Sleeps (never spins) until `duration` after the call: the device is busy with one op. The
  // wake-up is an absolute deadline, so a late wake-up is not compounded within the op.
  absl::Status Occupy(absl::Duration duration);
  // Sum of every duration passed to Occupy (the modelled busy time, not the slept one).
  absl::Duration occupied() const { return occupied_; }

 private:
  // A copy of `bytes` on the engine whose next free moment is `engine_free`: when it ends.
  absl::Duration ScheduleCopy(int64_t bytes, absl::Duration& engine_free) const;

  SimDeviceOptions options_;
  SimMemory memory_;
  SimMemory offload_{"sim offload", 0};
  absl::Duration occupied_;
  // When each copy engine is next free, on the monotonic clock (see MonotonicNow).
  absl::Duration to_host_free_;
  absl::Duration from_host_free_;
  HostAllocator staging_{"staging"};
  SimTensorOps tensor_ops_;
  SimMatmulOps matmul_ops_;
  SimActivationOps activation_ops_;
  SimNormOps norm_ops_;
  SimConvOps conv_ops_;
  SimAttentionOps attention_ops_;
  SimEmbeddingOps embedding_ops_;
  SimLossOps loss_ops_;
  SimOptimizerOps optimizer_ops_;
  Ops ops_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_SIM_SIM_DEVICE_H_
