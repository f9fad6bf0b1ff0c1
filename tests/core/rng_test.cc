#include "runtime/core/rng.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace gpipe {
namespace {

// Known-answer vectors published with Random123 (kat_vectors, philox4x32_10).
TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(Philox4x32({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(Philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(Philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(RandomStreamTest, SameKeySameNumbers) {
  RandomStream a(42, {1, 2, 3});
  RandomStream b(42, {1, 2, 3});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.NextU32(), b.NextU32());
}

TEST(RandomStreamTest, DifferentKeysOrSeedsDiffer) {
  std::set<uint32_t> firsts;
  for (uint64_t seed : {1, 2}) {
    for (uint64_t k : {0, 1, 2, 3}) firsts.insert(RandomStream(seed, {k, 7}).NextU32());
  }
  EXPECT_EQ(firsts.size(), 8u);
}

TEST(RandomStreamTest, SeekReproducesSequentialDraws) {
  RandomStream sequential(9, {4});
  std::vector<uint32_t> words;
  for (int i = 0; i < 23; ++i) words.push_back(sequential.NextU32());
  for (uint64_t start : {0, 1, 3, 4, 5, 11, 20}) {
    RandomStream seeked(9, {4});
    seeked.Seek(start);
    for (size_t i = start; i < words.size(); ++i) EXPECT_EQ(seeked.NextU32(), words[i]) << start;
  }
}

TEST(RandomStreamTest, UniformInUnitIntervalWithPlausibleMoments) {
  RandomStream stream(3, {});
  double sum = 0, sum_sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const float u = stream.NextUniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    sum_sq += u * u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_NEAR(sum_sq / n - (sum / n) * (sum / n), 1.0 / 12, 0.003);
}

TEST(RandomStreamTest, NormalHasZeroMeanUnitVariance) {
  RandomStream stream(5, {1});
  double sum = 0, sum_sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = stream.NextNormal();
    sum += x;
    sum_sq += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum_sq / n, 1.0, 0.02);
}

}  // namespace
}  // namespace gpipe
