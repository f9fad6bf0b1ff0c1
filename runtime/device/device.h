// Device: one accelerator (or the CPU) as a stage sees it: memory with every byte counted,
// and the dense linear algebra layers call. Backends are separate targets (cpu/, later cuda/
// and sim/); shared code sees only this interface.
//
// Thread-compatibility: one thread uses a Device at a time, except memory(), which is
// thread-safe.
#ifndef GPIPE_RUNTIME_DEVICE_DEVICE_H_
#define GPIPE_RUNTIME_DEVICE_DEVICE_H_

#include <string>

#include "absl/status/status.h"
#include "runtime/core/allocator.h"
#include "runtime/core/memory_tracker.h"

namespace gpipe {

enum class DeviceKind { kCpu, kCuda, kSim };

// Row-major GEMM operands (C = alpha * op(A) op(B) + beta * C), as in cblas with CblasRowMajor.
struct GemmArgs {
  bool transpose_a = false;
  bool transpose_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float beta = 0.0f;
  float* c = nullptr;
  int64_t ldc = 0;
};

class Device : public Allocator {
 public:
  virtual DeviceKind kind() const = 0;
  // "cpu", "cuda:0".
  virtual std::string name() const = 0;
  // Byte accounting of every allocation made through this device.
  virtual MemoryTracker& memory() = 0;
  // C = alpha * op(A) * op(B) + beta * C. Deterministic for fixed shapes and thread count.
  virtual absl::Status Gemm(const GemmArgs& args) = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_DEVICE_H_
