// RowCache: the rows of a data set that computes each sample from its index (a pure function),
// kept after their first computation so later epochs copy instead of recomputing. Holds nothing
// when the whole set would exceed the budget (such a set recomputes every time). Thread-safe.
#ifndef GPIPE_RUNTIME_DATA_ROW_CACHE_H_
#define GPIPE_RUNTIME_DATA_ROW_CACHE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gpipe {

class RowCache {
 public:
  // `rows` rows of `width` floats; cached when rows * width * 4 <= budget_bytes.
  RowCache(int64_t rows, int64_t width, int64_t budget_bytes);

  // Writes row `index` (in [0, rows)) into `out` (width floats): from the cache, or by
  // `compute(index, out)`, whose result is then kept.
  void Get(int64_t index, float* out, const std::function<void(int64_t, float*)>& compute) const;

 private:
  const int64_t width_;
  const bool enabled_;
  mutable absl::Mutex mu_;
  mutable std::vector<float> values_ ABSL_GUARDED_BY(mu_);  // [rows, width] once first used
  mutable std::vector<bool> filled_ ABSL_GUARDED_BY(mu_);
  const int64_t rows_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DATA_ROW_CACHE_H_
