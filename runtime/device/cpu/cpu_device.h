// CpuDevice: the reference backend. Host memory from the C++ heap (64-byte aligned), GEMM from
// OpenBLAS's CBLAS with a fixed thread count (1 by default, so results are deterministic and
// K processes share the cores fairly).
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_DEVICE_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_DEVICE_H_

#include <cstdint>
#include <string>

#include "runtime/device/device.h"

namespace gpipe {

struct CpuDeviceOptions {
  // OpenBLAS threads used by Gemm.
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

  DeviceKind kind() const override { return DeviceKind::kCpu; }
  std::string name() const override { return "cpu"; }
  MemoryTracker& memory() override { return memory_; }
  absl::Status Gemm(const GemmArgs& args) override;

 private:
  CpuDeviceOptions options_;
  MemoryTracker memory_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_DEVICE_H_
