// BadId (runtime/device/ops/bad_id.h): the host-side search for the first id outside a range,
// used by the CPU kernels and by the data path before an upload, and the status payload that
// carries a device-found bad id back to the layer.
#include "runtime/device/ops/bad_id.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace gpipe {
namespace {

std::optional<BadId> FirstOutside(const std::vector<int64_t>& ids, int64_t limit) {
  return FirstIdOutside(std::span<const int64_t>(ids), limit);
}

TEST(FirstIdOutsideTest, FindsTheFirstBadIdAtAnyPosition) {
  struct Case {
    std::vector<int64_t> ids;
    int64_t index;
    int64_t id;
  };
  const std::vector<Case> cases = {
      {{5, 0, 1, 2}, 0, 5},            // first position, id == limit
      {{0, 1, 9, 2, 7}, 2, 9},         // middle; a later bad id is not the first
      {{0, 1, 2, 3, 6}, 4, 6},         // last position
      {{3, -1, 2}, 1, -1},             // negative
      {{INT64_MIN, 0}, 0, INT64_MIN},  // the most negative
      {{0, INT64_MAX}, 1, INT64_MAX},
  };
  for (const Case& c : cases) {
    const std::optional<BadId> bad = FirstOutside(c.ids, 5);
    ASSERT_TRUE(bad.has_value()) << ::testing::PrintToString(c.ids);
    EXPECT_EQ(bad->index, c.index) << ::testing::PrintToString(c.ids);
    EXPECT_EQ(bad->id, c.id) << ::testing::PrintToString(c.ids);
  }
}

TEST(FirstIdOutsideTest, AcceptsEveryIdInRangeAndNoIds) {
  EXPECT_FALSE(FirstOutside({0, 4, 4, 1, 0}, 5).has_value());
  EXPECT_FALSE(FirstOutside({}, 5).has_value());
  EXPECT_FALSE(FirstOutside({50303}, 50304).has_value());
  EXPECT_TRUE(FirstOutside({50304}, 50304).has_value());
}

TEST(BadIdPayloadTest, RoundTripsThroughTheStatus) {
  const absl::Status status = BadIdError("index 3 has id -7", BadId{.index = 3, .id = -7});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  const std::optional<BadId> bad = BadIdOf(status);
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->index, 3);
  EXPECT_EQ(bad->id, -7);
  EXPECT_FALSE(BadIdOf(absl::InvalidArgumentError("no payload")).has_value());
}

}  // namespace
}  // namespace gpipe
