// ShardRange's parts (equal parts, the remainder to the last member, each element owned once)
// and ElementView (a view sharing storage, 1-D or [1, n] by the tensor's rank).
#include "runtime/core/element_range.h"

#include <vector>

#include "gtest/gtest.h"
#include "runtime/device/cpu/cpu_device.h"

namespace gpipe {
namespace {

TEST(ShardRangeTest, PartsCoverEveryElementOnceInMemberOrder) {
  for (int64_t elements : {0, 1, 2, 3, 4, 7, 8, 9, 100, 101}) {
    for (int members : {1, 2, 3, 4, 8}) {
      SCOPED_TRACE(testing::Message() << elements << " elements, " << members << " members");
      int64_t next = 0;
      for (int m = 0; m < members; ++m) {
        const ElementRange part = ShardRange(elements, members, m);
        EXPECT_EQ(part.begin, next);
        EXPECT_GE(part.size(), 0);
        // Equal parts; only the last member's may be larger, by less than `members`.
        if (m < members - 1) {
          EXPECT_EQ(part.size(), elements / members);
        } else {
          EXPECT_LT(part.size() - elements / members, members);
        }
        next = part.end;
      }
      EXPECT_EQ(next, elements);
    }
  }
  EXPECT_EQ(ShardRange(10, 4, 0), (ElementRange{0, 2}));
  EXPECT_EQ(ShardRange(10, 4, 3), (ElementRange{6, 10}));
  EXPECT_TRUE(ShardRange(3, 4, 0).empty());  // smaller than the group: the last member's
  EXPECT_EQ(ShardRange(3, 4, 3), (ElementRange{0, 3}));
  EXPECT_EQ(ShardRange(10, 4, 3).ToString(), "[6, 10)");
}

TEST(ElementViewTest, ViewsShareStorageAndKeepTheRankClass) {
  CpuDevice device;
  Tensor matrix = *Tensor::Empty(device, Shape({3, 4}), DType::kF32, MemoryKind::kParameter);
  for (int i = 0; i < 12; ++i) matrix.f32()[i] = static_cast<float>(i);
  absl::StatusOr<Tensor> part = ElementView(matrix, {5, 9});
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->shape(), Shape({1, 4}));
  EXPECT_TRUE(part->SharesStorageWith(matrix));
  EXPECT_EQ(part->f32()[0], 5.0f);
  part->f32()[3] = -1.0f;
  EXPECT_EQ(matrix.f32()[8], -1.0f);

  Tensor vector = *Tensor::Empty(device, Shape({6}), DType::kF32, MemoryKind::kParameter);
  absl::StatusOr<Tensor> tail = ElementView(vector, {4, 6});
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(tail->shape(), Shape({2}));

  EXPECT_EQ(ElementView(vector, {3, 3}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ElementView(vector, {4, 7}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ElementView(Tensor(), {0, 1}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpipe
