// MemoryTracker: counts every byte a device hands out, current and peak, in total and per kind.
// Thread-safe. Peaks can be reset (e.g. per step) without touching current counts.
#ifndef GPIPE_RUNTIME_CORE_MEMORY_TRACKER_H_
#define GPIPE_RUNTIME_CORE_MEMORY_TRACKER_H_

#include <array>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gpipe {

// What an allocation holds; metrics report each kind separately.
enum class MemoryKind : int {
  kParameter = 0,   // layer weights and biases
  kGradient,        // accumulated parameter gradients
  kOptimizerState,  // momentum buffers, Adam moments
  kBoundary,        // stage inputs kept per micro-batch (and boundary tensors in flight)
  kActivation,      // activations saved inside a stage for backward
  kWorkspace,       // temporaries of one op
  kData,            // loaded samples and targets
  kBoundaryGrad,    // gradients in flight: dL/d(stage output) received, dL/d(stage input) to send
  kCount,
};

const char* MemoryKindName(MemoryKind kind);

class MemoryTracker {
 public:
  static constexpr int kKinds = static_cast<int>(MemoryKind::kCount);

  void Allocated(MemoryKind kind, int64_t bytes);
  void Freed(MemoryKind kind, int64_t bytes);
  // `bytes` already counted under `from` are counted under `to` from now on (total unchanged).
  void Moved(MemoryKind from, MemoryKind to, int64_t bytes);

  int64_t current() const;
  int64_t peak() const;
  int64_t current(MemoryKind kind) const;
  int64_t peak(MemoryKind kind) const;
  // Sets every peak to the current value.
  void ResetPeaks();

 private:
  mutable absl::Mutex mu_;
  int64_t current_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_ ABSL_GUARDED_BY(mu_) = 0;
  std::array<int64_t, kKinds> current_by_kind_ ABSL_GUARDED_BY(mu_) = {};
  std::array<int64_t, kKinds> peak_by_kind_ ABSL_GUARDED_BY(mu_) = {};
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_MEMORY_TRACKER_H_
