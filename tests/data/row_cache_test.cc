#include "runtime/data/row_cache.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gpipe {
namespace {

TEST(RowCacheTest, ComputesEachRowOnceWithinTheBudget) {
  RowCache cache(/*rows=*/10, /*width=*/3, /*budget_bytes=*/10 * 3 * 4);
  int computed = 0;
  const auto compute = [&](int64_t index, float* out) {
    ++computed;
    for (int i = 0; i < 3; ++i) out[i] = static_cast<float>(index * 10 + i);
  };
  float row[3];
  for (int pass = 0; pass < 3; ++pass) {
    for (int64_t index : {4, 0, 9, 4}) {
      cache.Get(index, row, compute);
      EXPECT_EQ(row[0], index * 10);
      EXPECT_EQ(row[2], index * 10 + 2);
    }
  }
  EXPECT_EQ(computed, 3);  // rows 4, 0 and 9, once each
}

TEST(RowCacheTest, OverTheBudgetEveryRowIsRecomputed) {
  RowCache cache(/*rows=*/10, /*width=*/3, /*budget_bytes=*/10 * 3 * 4 - 1);
  int computed = 0;
  float row[3];
  for (int pass = 0; pass < 2; ++pass) {
    cache.Get(1, row, [&](int64_t, float* out) {
      ++computed;
      out[0] = out[1] = out[2] = 1.0f;
    });
  }
  EXPECT_EQ(computed, 2);
}

TEST(RowCacheTest, ConcurrentReadersSeeTheSameRows) {
  RowCache cache(/*rows=*/64, /*width=*/8, /*budget_bytes=*/1 << 20);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      float row[8];
      for (int64_t index = 0; index < 64; ++index) {
        cache.Get(index, row, [](int64_t i, float* out) {
          for (int k = 0; k < 8; ++k) out[k] = static_cast<float>(i * 8 + k);
        });
        for (int k = 0; k < 8; ++k) mismatches[t] += row[k] != static_cast<float>(index * 8 + k);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0);
}

}  // namespace
}  // namespace gpipe
