// MpiDataChannel's reduce groups over the whole job and over sub-groups (buckets started
// asynchronously, in order; all-reduce, and the reduce-scatter and all-gather of a sharded
// optimizer state), their checks and deadlines, run with 2 and 4 ranks.
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/mpi_data_channel.h"
#include "runtime/core/element_range.h"
#include "tests/comm/mpi_test_support.h"

namespace gpipe {
namespace {

using ::gpipe::testing::CountingHostAllocator;
using ::gpipe::testing::DeadlineIn;
using ::gpipe::testing::SyncRanks;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr absl::Duration kGenerous = absl::Seconds(20);

// Integers below 2^24 whose sums over a few ranks stay exact in f32.
float Contribution(int rank, int tensor, int64_t index) {
  return static_cast<float>((rank + 1) * 1000 + tensor * 100 + index % 97);
}

class MpiAllReduceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rank_ = gpipe::testing::WorldRank();
    size_ = gpipe::testing::WorldSize();
    absl::StatusOr<std::unique_ptr<MpiDataChannel>> channel =
        MpiDataChannel::Create(MPI_COMM_WORLD, AbortPoller(), nullptr);
    ASSERT_TRUE(channel.ok()) << channel.status();
    channel_ = std::move(*channel);
  }
  void TearDown() override { SyncRanks(); }

  // Tensors of the given shapes holding this rank's contributions.
  std::vector<Tensor> Contributions(const std::vector<Shape>& shapes) {
    std::vector<Tensor> tensors;
    for (size_t t = 0; t < shapes.size(); ++t) {
      absl::StatusOr<Tensor> tensor =
          Tensor::Empty(allocator_, shapes[t], DType::kF32, MemoryKind::kGradient);
      GPIPE_CHECK(tensor.ok());
      for (int64_t i = 0; i < tensor->num_elements(); ++i) {
        tensor->f32()[i] = Contribution(rank_, static_cast<int>(t), i);
      }
      tensors.push_back(*std::move(tensor));
    }
    return tensors;
  }
  // How many elements differ from the sum of the contributions of `group`.
  static int64_t SumMismatches(const std::vector<Tensor>& tensors, const std::vector<int>& group) {
    int64_t mismatches = 0;
    for (size_t t = 0; t < tensors.size(); ++t) {
      for (int64_t i = 0; i < tensors[t].num_elements(); ++i) {
        float expected = 0;
        for (int rank : group) expected += Contribution(rank, static_cast<int>(t), i);
        mismatches += tensors[t].f32()[i] != expected;
      }
    }
    return mismatches;
  }
  // Sums `tensors` over `group` as one bucket of a group made for the purpose.
  absl::Status ReduceOnce(std::vector<Tensor>& tensors, const std::vector<int>& group) {
    std::vector<int64_t> counts;
    for (const Tensor& tensor : tensors) counts.push_back(tensor.num_elements());
    absl::StatusOr<std::unique_ptr<ReduceGroup>> reducer =
        channel_->CreateReduceGroup(group, {counts}, DeadlineIn(kGenerous));
    if (!reducer.ok()) return reducer.status();
    absl::StatusOr<std::unique_ptr<TransferHandle>> handle = (*reducer)->Start(0, tensors);
    if (!handle.ok()) return handle.status();
    return (*handle)->Wait(DeadlineIn(kGenerous));
  }
  std::vector<int> WholeJob() const {
    std::vector<int> ranks;
    for (int r = 0; r < size_; ++r) ranks.push_back(r);
    return ranks;
  }

  int rank_ = 0;
  int size_ = 0;
  CountingHostAllocator allocator_;
  std::unique_ptr<MpiDataChannel> channel_;
};

TEST_F(MpiAllReduceTest, SumsExactlyOverTheWholeJob) {
  const std::vector<Shape> shapes = {Shape({1}), Shape({17}), Shape({64, 129})};
  std::vector<Tensor> tensors = Contributions(shapes);
  const std::vector<int> group = WholeJob();
  const absl::Status status = ReduceOnce(tensors, group);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(SumMismatches(tensors, group), 0);
}

TEST_F(MpiAllReduceTest, SumsExactlyOverDisjointSubGroupsAtTheSameTime) {
  if (size_ < 4) GTEST_SKIP() << "needs 4 ranks";
  // Replica groups of a 2-stage, 2-replica job: {0, 2} and {1, 3}; rank order given unsorted.
  const std::vector<int> group = rank_ % 2 == 0 ? std::vector<int>{2, 0} : std::vector<int>{3, 1};
  std::vector<Tensor> tensors = Contributions({Shape({3, 100}), Shape({1000})});
  const absl::Status status = ReduceOnce(tensors, group);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(SumMismatches(tensors, group), 0);
}

TEST_F(MpiAllReduceTest, SumsExactlyOverASubGroupWhileOtherRanksStayOut) {
  if (size_ < 4) GTEST_SKIP() << "needs 4 ranks";
  if (rank_ == 3) return;
  const std::vector<int> group = {0, 1, 2};
  std::vector<Tensor> tensors = Contributions({Shape({4096})});
  const absl::Status status = ReduceOnce(tensors, group);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(SumMismatches(tensors, group), 0);
}

TEST_F(MpiAllReduceTest, BadGroupsAndDtypesAreRejected) {
  const std::vector<int> without_me = {(rank_ + 1) % size_};
  absl::StatusOr<std::unique_ptr<ReduceGroup>> reducer =
      channel_->CreateReduceGroup(without_me, {{10}}, DeadlineIn(kGenerous));
  EXPECT_EQ(reducer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(reducer.status().message()), HasSubstr("this rank is not in the group"));

  const std::vector<int> twice = {rank_, rank_};
  EXPECT_EQ(channel_->CreateReduceGroup(twice, {{10}}, DeadlineIn(kGenerous)).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<int> outside = {rank_, size_};
  EXPECT_EQ(channel_->CreateReduceGroup(outside, {{10}}, DeadlineIn(kGenerous)).status().code(),
            absl::StatusCode::kInvalidArgument);

  absl::StatusOr<Tensor> ids =
      Tensor::Empty(allocator_, Shape({4}), DType::kI64, MemoryKind::kData);
  ASSERT_TRUE(ids.ok());
  std::vector<Tensor> int_tensors = {*ids};
  const absl::Status status = ReduceOnce(int_tensors, WholeJob());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("holds f32 tensors, got i64"));
}

TEST_F(MpiAllReduceTest, MembersThatDisagreeOnSizesFailNamingBothSides) {
  if (rank_ > 1) GTEST_SKIP() << "between ranks 0 and 1";
  const std::vector<int> group = {0, 1};
  std::vector<Tensor> tensors = Contributions({Shape({rank_ == 0 ? 100 : 90})});
  const absl::Status status = ReduceOnce(tensors, group);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  const std::string expected =
      rank_ == 0 ? "rank 0 all-reduces 1 tensor (100 floats) over ranks [0, 1] but rank 1 "
                   "all-reduces 1 tensor (90 floats)"
                 : "rank 1 all-reduces 1 tensor (90 floats) over ranks [0, 1] but rank 0 "
                   "all-reduces 1 tensor (100 floats)";
  EXPECT_EQ(status.message(), expected);
  // Nothing was reduced.
  EXPECT_EQ(SumMismatches(tensors, {rank_}), 0);
}

// ---- reduce groups (the data-parallel gradient buckets) ------------------------------------

TEST_F(MpiAllReduceTest, ReduceGroupBucketsSumExactlyEveryStepWhileTheCallerWorks) {
  const std::vector<int> group = WholeJob();
  // Bucket 0: two tensors; bucket 1: one large tensor.
  absl::StatusOr<std::unique_ptr<ReduceGroup>> reducer =
      channel_->CreateReduceGroup(group, {{6, 40}, {100000}}, DeadlineIn(kGenerous));
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  for (int step = 0; step < 3; ++step) {
    std::vector<Tensor> first = Contributions({Shape({2, 3}), Shape({40})});
    std::vector<Tensor> second = Contributions({Shape({100000})});
    absl::StatusOr<std::unique_ptr<TransferHandle>> a = (*reducer)->Start(0, first);
    ASSERT_TRUE(a.ok()) << a.status();
    absl::StatusOr<std::unique_ptr<TransferHandle>> b = (*reducer)->Start(1, second);
    ASSERT_TRUE(b.ok()) << b.status();
    // The starts returned before the sums: poll as the executor does between layers.
    while (!(*a)->Done() || !(*b)->Done()) absl::SleepFor(absl::Microseconds(50));
    ASSERT_TRUE((*a)->Wait(DeadlineIn(kGenerous)).ok());
    ASSERT_TRUE((*b)->Wait(DeadlineIn(kGenerous)).ok());
    EXPECT_EQ(SumMismatches(first, group), 0) << "step " << step;
    // Bucket 1's single tensor is "tensor 0" of its own Contributions call.
    EXPECT_EQ(SumMismatches(second, group), 0) << "step " << step;
  }
}

TEST_F(MpiAllReduceTest, ReduceGroupRefusesBucketsOutOfOrderOrOfOtherSizes) {
  absl::StatusOr<std::unique_ptr<ReduceGroup>> reducer =
      channel_->CreateReduceGroup(WholeJob(), {{4}, {8}}, DeadlineIn(kGenerous));
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  std::vector<Tensor> eight = Contributions({Shape({8})});
  absl::StatusOr<std::unique_ptr<TransferHandle>> early = (*reducer)->Start(1, eight);
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(early.status().message()),
              HasSubstr("bucket 1 started while bucket 0 is next"));
  absl::StatusOr<std::unique_ptr<TransferHandle>> wrong = (*reducer)->Start(0, eight);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.status().message()),
              HasSubstr("bucket 0 was created for tensors of [4] elements, started with [8]"));
}

TEST_F(MpiAllReduceTest, ReduceGroupMembersThatDisagreeOnBucketsFailAtCreation) {
  if (rank_ > 1) GTEST_SKIP() << "between ranks 0 and 1";
  const std::vector<std::vector<int64_t>> buckets =
      rank_ == 0 ? std::vector<std::vector<int64_t>>{{10, 20}}
                 : std::vector<std::vector<int64_t>>{{10}, {20}};
  absl::StatusOr<std::unique_ptr<ReduceGroup>> reducer =
      channel_->CreateReduceGroup(std::vector<int>{0, 1}, buckets, DeadlineIn(kGenerous));
  EXPECT_EQ(reducer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(reducer.status().message()),
      HasSubstr(rank_ == 0 ? "all-reduces 2 tensors (30 floats) over ranks [0, 1] but rank 1 "
                             "all-reduces 2 tensors (30 floats in 2 buckets)"
                           : "all-reduces 2 tensors (30 floats in 2 buckets) over ranks [0, "
                             "1] but rank 0 all-reduces 2 tensors (30 floats)"));
}

TEST_F(MpiAllReduceTest, ReduceGroupOfOneRankSumsNothing) {
  absl::StatusOr<std::unique_ptr<ReduceGroup>> reducer =
      channel_->CreateReduceGroup(std::vector<int>{rank_}, {{5}}, DeadlineIn(kGenerous));
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  std::vector<Tensor> tensors = Contributions({Shape({5})});
  absl::StatusOr<std::unique_ptr<TransferHandle>> handle = (*reducer)->Start(0, tensors);
  ASSERT_TRUE(handle.ok()) << handle.status();
  EXPECT_TRUE((*handle)->Done());
  EXPECT_EQ(SumMismatches(tensors, {rank_}), 0);
}

// ---- sharded optimizer state: reduce-scatter, then all-gather ------------------------------

// Checks a reduce-scatter over `group` (this rank being member `member`) and the all-gather
// that follows: the member's parts hold the group's sums, then every element does.
void ExpectScatterThenGather(ReduceGroup& group_reducer, std::vector<Tensor>& tensors,
                             const std::vector<int>& group, int member, int rank) {
  const int members = static_cast<int>(group.size());
  absl::StatusOr<std::unique_ptr<TransferHandle>> scatter =
      group_reducer.StartCollective(Collective::kReduceScatter, 0, tensors);
  ASSERT_TRUE(scatter.ok()) << scatter.status();
  ASSERT_TRUE((*scatter)->Wait(DeadlineIn(kGenerous)).ok());
  for (size_t t = 0; t < tensors.size(); ++t) {
    const ElementRange part = ShardRange(tensors[t].num_elements(), members, member);
    for (int64_t i = part.begin; i < part.end; ++i) {
      float expected = 0;
      for (int r : group) expected += Contribution(r, static_cast<int>(t), i);
      ASSERT_EQ(tensors[t].f32()[i], expected) << "tensor " << t << " element " << i;
    }
    // Outside its part a member's values are unspecified: spoil them, the gather replaces them.
    for (int64_t i = 0; i < tensors[t].num_elements(); ++i) {
      if (i < part.begin || i >= part.end) tensors[t].f32()[i] = -1.0f - rank;
    }
  }
  absl::StatusOr<std::unique_ptr<TransferHandle>> gather =
      group_reducer.StartCollective(Collective::kAllGather, 0, tensors);
  ASSERT_TRUE(gather.ok()) << gather.status();
  while (!(*gather)->Done()) absl::SleepFor(absl::Microseconds(50));
  ASSERT_TRUE((*gather)->Wait(DeadlineIn(kGenerous)).ok());
  int64_t mismatches = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    for (int64_t i = 0; i < tensors[t].num_elements(); ++i) {
      float expected = 0;
      for (int r : group) expected += Contribution(r, static_cast<int>(t), i);
      mismatches += tensors[t].f32()[i] != expected;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_F(MpiAllReduceTest, ReduceScatterThenAllGatherOverTheWholeJob) {
  // Sizes the group divides, does not divide, and smaller than the group (the last member's).
  const std::vector<Shape> shapes = {Shape({1}), Shape({3}), Shape({17}), Shape({64, 129}),
                                     Shape({8})};
  std::vector<int64_t> counts;
  for (const Shape& shape : shapes) counts.push_back(shape.num_elements());
  absl::StatusOr<std::unique_ptr<ReduceGroup>> reducer =
      channel_->CreateReduceGroup(WholeJob(), {counts}, DeadlineIn(kGenerous));
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  for (int step = 0; step < 2; ++step) {
    std::vector<Tensor> tensors = Contributions(shapes);
    ExpectScatterThenGather(**reducer, tensors, WholeJob(), rank_, rank_);
  }
}

TEST_F(MpiAllReduceTest, ReduceScatterOrdersMembersByRankWhateverTheGroupOrder) {
  if (size_ < 4) GTEST_SKIP() << "needs 4 ranks";
  // Replica groups of a 2-stage, 2-replica job, given unsorted: member = place by rank.
  const std::vector<int> given = rank_ % 2 == 0 ? std::vector<int>{2, 0} : std::vector<int>{3, 1};
  const std::vector<int> sorted = {given[1], given[0]};
  absl::StatusOr<std::unique_ptr<ReduceGroup>> reducer =
      channel_->CreateReduceGroup(given, {{5, 1000}}, DeadlineIn(kGenerous));
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  std::vector<Tensor> tensors = Contributions({Shape({5}), Shape({1000})});
  ExpectScatterThenGather(**reducer, tensors, sorted, rank_ < 2 ? 0 : 1, rank_);
}

TEST_F(MpiAllReduceTest, GathersAndReductionsKeepTheirOwnBucketOrders) {
  absl::StatusOr<std::unique_ptr<ReduceGroup>> reducer =
      channel_->CreateReduceGroup(WholeJob(), {{4}, {8}}, DeadlineIn(kGenerous));
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  std::vector<Tensor> four = Contributions({Shape({4})});
  std::vector<Tensor> eight = Contributions({Shape({8})});
  // Reductions ascend: bucket 1 cannot start first.
  absl::StatusOr<std::unique_ptr<TransferHandle>> early =
      (*reducer)->StartCollective(Collective::kReduceScatter, 1, eight);
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(early.status().message()),
              HasSubstr("reduce-scatter of bucket 1 started while bucket 0 is next"));
  // Gathers descend, once each: after bucket 0, bucket 1 (or 0 again) is refused.
  absl::StatusOr<std::unique_ptr<TransferHandle>> first =
      (*reducer)->StartCollective(Collective::kAllGather, 0, four);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE((*first)->Wait(DeadlineIn(kGenerous)).ok());
  for (int bucket : {1, 0}) {
    absl::StatusOr<std::unique_ptr<TransferHandle>> late =
        (*reducer)->StartCollective(Collective::kAllGather, bucket, bucket == 1 ? eight : four);
    EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(late.status().message()),
                HasSubstr(absl::StrCat("all-gather of bucket ", bucket,
                                       " started after that of bucket 0")));
  }
}

// The deadline case comes last: the description rank 0 sent is never received, and must not
// meet a later test's exchange.
TEST_F(MpiAllReduceTest, ReduceGroupMemberThatNeverComesIsADeadline) {
  if (rank_ != 0) return;
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<ReduceGroup>> reducer =
      channel_->CreateReduceGroup(std::vector<int>{0, 1}, {{8}}, start + absl::Milliseconds(300));
  EXPECT_EQ(reducer.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(reducer.status().message()),
              StartsWith("rank 0 all-reducing gradient buckets over ranks [0, 1]; ranks [1] have "
                         "not joined: no progress after 0.3s"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

}  // namespace
}  // namespace gpipe
