#include "runtime/data/row_cache.h"

#include <algorithm>

namespace gpipe {

RowCache::RowCache(int64_t rows, int64_t width, int64_t budget_bytes)
    : width_(width),
      enabled_(rows > 0 && width > 0 && rows <= budget_bytes / 4 / width),
      rows_(rows) {}

void RowCache::Get(int64_t index, float* out,
                   const std::function<void(int64_t, float*)>& compute) const {
  if (!enabled_) {
    compute(index, out);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (values_.empty()) {
      values_.resize(static_cast<size_t>(rows_ * width_));
      filled_.assign(static_cast<size_t>(rows_), false);
    }
    if (filled_[index]) {
      std::copy_n(values_.data() + index * width_, width_, out);
      return;
    }
  }
  // Computed outside the lock (rows are independent); the first writer's copy is kept, and
  // every writer computes the same values.
  compute(index, out);
  absl::MutexLock lock(&mu_);
  if (!filled_[index]) {
    std::copy_n(out, width_, values_.data() + index * width_);
    filled_[index] = true;
  }
}

}  // namespace gpipe
