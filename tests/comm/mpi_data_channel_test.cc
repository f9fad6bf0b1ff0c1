// MpiDataChannel point-to-point transfers between real MPI ranks (run with 2 and 3 ranks).
#include "runtime/comm/mpi_data_channel.h"

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/comm/mpi_test_support.h"

namespace gpipe {
namespace {

using ::gpipe::testing::CountingHostAllocator;
using ::gpipe::testing::CountKeyedMismatches;
using ::gpipe::testing::DeadlineIn;
using ::gpipe::testing::FillKeyed;
using ::gpipe::testing::SyncRanks;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr absl::Duration kGenerous = absl::Seconds(20);

class MpiDataChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rank_ = gpipe::testing::WorldRank();
    size_ = gpipe::testing::WorldSize();
    absl::StatusOr<std::unique_ptr<MpiDataChannel>> channel =
        MpiDataChannel::Create(MPI_COMM_WORLD, AbortPoller(), nullptr);
    ASSERT_TRUE(channel.ok()) << channel.status();
    channel_ = std::move(*channel);
  }
  // Runs after failed assertions too, so ranks stay in step from test to test.
  void TearDown() override { SyncRanks(); }

  Tensor NewTensor(const Shape& shape, DType dtype = DType::kF32) {
    absl::StatusOr<Tensor> tensor = Tensor::Empty(allocator_, shape, dtype, MemoryKind::kBoundary);
    GPIPE_CHECK(tensor.ok()) << tensor.status();
    return *std::move(tensor);
  }
  int next() const { return (rank_ + 1) % size_; }
  int prev() const { return (rank_ + size_ - 1) % size_; }

  int rank_ = 0;
  int size_ = 0;
  // Declared first so it outlives every tensor the channel might still hold.
  CountingHostAllocator allocator_;
  std::unique_ptr<MpiDataChannel> channel_;
};

TEST_F(MpiDataChannelTest, DeliversExactValuesForSeveralShapesAndDtypes) {
  struct Case {
    Shape shape;
    DType dtype;
  };
  const std::vector<Case> cases = {
      {Shape(), DType::kF32},           {Shape({1}), DType::kF32},
      {Shape({7}), DType::kF32},        {Shape({8, 256}), DType::kF32},
      {Shape({3, 5, 7}), DType::kF32},  {Shape({2, 3, 4, 5}), DType::kF32},
      {Shape({0, 4}), DType::kF32},     {Shape({2, 1, 1, 1, 1, 1, 1, 3}), DType::kF32},
      {Shape({64, 1000}), DType::kF32}, {Shape({5, 9}), DType::kI64},
      {Shape({1000}), DType::kI64},
  };
  std::vector<Tensor> inbox;
  std::vector<std::unique_ptr<TransferHandle>> receives;
  std::vector<std::unique_ptr<TransferHandle>> sends;
  for (int i = 0; i < static_cast<int>(cases.size()); ++i) {
    inbox.push_back(NewTensor(cases[i].shape, cases[i].dtype));
    auto handle = channel_->Recv(inbox.back(), prev(), TransferKey{.step = 1, .micro_batch = i});
    ASSERT_TRUE(handle.ok()) << handle.status();
    receives.push_back(*std::move(handle));
  }
  for (int i = 0; i < static_cast<int>(cases.size()); ++i) {
    Tensor outgoing = NewTensor(cases[i].shape, cases[i].dtype);
    FillKeyed(outgoing, rank_, i);
    auto handle = channel_->Send(outgoing, next(), TransferKey{.step = 1, .micro_batch = i});
    ASSERT_TRUE(handle.ok()) << handle.status();
    sends.push_back(*std::move(handle));
  }
  for (int i = 0; i < static_cast<int>(cases.size()); ++i) {
    ASSERT_TRUE(receives[i]->Wait(DeadlineIn(kGenerous)).ok()) << i;
    EXPECT_EQ(CountKeyedMismatches(inbox[i], prev(), i), 0) << inbox[i].DebugString();
  }
  for (auto& send : sends) EXPECT_TRUE(send->Wait(DeadlineIn(kGenerous)).ok());
  EXPECT_EQ(channel_->abandoned_requests(), 0);
}

TEST_F(MpiDataChannelTest, ReceivesPostedInAnyOrderGetTheirOwnMicroBatch) {
  constexpr int kMicroBatches = 32;
  auto shape_of = [](int mb) { return Shape({mb % 5 + 1, 97 * (mb % 3 + 1)}); };
  // Receives are posted in a scrambled order (7 is coprime with 32) and awaited in reverse.
  std::vector<Tensor> inbox(kMicroBatches);
  std::vector<std::unique_ptr<TransferHandle>> receives(kMicroBatches);
  for (int i = 0; i < kMicroBatches; ++i) {
    const int mb = (7 * i + 3) % kMicroBatches;
    inbox[mb] = NewTensor(shape_of(mb));
    auto handle = channel_->Recv(inbox[mb], prev(), TransferKey{.step = 2, .micro_batch = mb});
    ASSERT_TRUE(handle.ok()) << handle.status();
    receives[mb] = *std::move(handle);
  }
  std::vector<std::unique_ptr<TransferHandle>> sends;
  for (int mb = 0; mb < kMicroBatches; ++mb) {
    Tensor outgoing = NewTensor(shape_of(mb));
    FillKeyed(outgoing, rank_, mb);
    auto handle = channel_->Send(outgoing, next(), TransferKey{.step = 2, .micro_batch = mb});
    ASSERT_TRUE(handle.ok()) << handle.status();
    sends.push_back(*std::move(handle));
  }
  for (int mb = kMicroBatches - 1; mb >= 0; --mb) {
    const absl::Status status = receives[mb]->Wait(DeadlineIn(kGenerous));
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(CountKeyedMismatches(inbox[mb], prev(), mb), 0) << "micro-batch " << mb;
  }
  for (auto& send : sends) EXPECT_TRUE(send->Wait(DeadlineIn(kGenerous)).ok());
}

// Two stages (K=2) exchanging every micro-batch's activation forward and gradient backward,
// all in flight at once between the same two ranks.
TEST_F(MpiDataChannelTest, ActivationsAndGradientsInFlightBothWaysBetweenTheSamePair) {
  if (rank_ > 1) GTEST_SKIP() << "ranks 0 and 1 play the two stages";
  constexpr int kMicroBatches = 24;
  const int peer = 1 - rank_;
  const TransferKind outgoing_kind =
      rank_ == 0 ? TransferKind::kActivation : TransferKind::kGradient;
  const TransferKind incoming_kind =
      rank_ == 0 ? TransferKind::kGradient : TransferKind::kActivation;
  auto value_key = [](TransferKind kind, int mb) {
    return (kind == TransferKind::kActivation ? 0 : 32) + mb;
  };
  std::vector<Tensor> inbox;
  std::vector<std::unique_ptr<TransferHandle>> handles;
  for (int mb = 0; mb < kMicroBatches; ++mb) {
    inbox.push_back(NewTensor(Shape({4, 600})));
    auto receive = channel_->Recv(inbox.back(), peer,
                                  TransferKey{.step = 5, .micro_batch = mb, .kind = incoming_kind});
    ASSERT_TRUE(receive.ok()) << receive.status();
    handles.push_back(*std::move(receive));
    Tensor outgoing = NewTensor(Shape({4, 600}));
    FillKeyed(outgoing, rank_, value_key(outgoing_kind, mb));
    auto send = channel_->Send(outgoing, peer,
                               TransferKey{.step = 5, .micro_batch = mb, .kind = outgoing_kind});
    ASSERT_TRUE(send.ok()) << send.status();
    handles.push_back(*std::move(send));
  }
  // Alternate between the oldest and the newest outstanding handle.
  for (size_t lo = 0, hi = handles.size(); lo < hi;) {
    const size_t i = (lo + hi) % 2 == 0 ? lo++ : --hi;
    const absl::Status status = handles[i]->Wait(DeadlineIn(kGenerous));
    ASSERT_TRUE(status.ok()) << status;
  }
  for (int mb = 0; mb < kMicroBatches; ++mb) {
    EXPECT_EQ(CountKeyedMismatches(inbox[mb], peer, value_key(incoming_kind, mb)), 0)
        << "micro-batch " << mb;
  }
}

// Rank 1 sends `sent` while rank 0 expects `expected`; returns rank 0's status (OK elsewhere).
struct MismatchCase {
  TransferKey sent_key;
  Shape sent_shape;
  DType sent_dtype;
  TransferKey expected_key;
  Shape expected_shape;
  DType expected_dtype;
};

class MpiDataChannelMismatchTest : public MpiDataChannelTest {
 protected:
  absl::Status RunMismatch(const MismatchCase& c, absl::Duration receive_timeout) {
    if (rank_ == 1) {
      Tensor outgoing = NewTensor(c.sent_shape, c.sent_dtype);
      FillKeyed(outgoing, rank_, 0);
      auto send = channel_->Send(outgoing, 0, c.sent_key);
      EXPECT_TRUE(send.ok()) << send.status();
      if (send.ok()) {
        const absl::Status status = (*send)->Wait(DeadlineIn(kGenerous));
        EXPECT_TRUE(status.ok()) << "the sender's side completes: " << status;
      }
    }
    if (rank_ != 0) return absl::OkStatus();
    Tensor inbox = NewTensor(c.expected_shape, c.expected_dtype);
    auto receive = channel_->Recv(inbox, 1, c.expected_key);
    if (!receive.ok()) return receive.status();
    return (*receive)->Wait(DeadlineIn(receive_timeout));
  }
};

TEST_F(MpiDataChannelMismatchTest, AnotherStepIsInvalidArgumentNamingBothSides) {
  const absl::Status status = RunMismatch({.sent_key = {.step = 4, .micro_batch = 5},
                                           .sent_shape = Shape({8, 256}),
                                           .sent_dtype = DType::kF32,
                                           .expected_key = {.step = 3, .micro_batch = 5},
                                           .expected_shape = Shape({8, 256}),
                                           .expected_dtype = DType::kF32},
                                          kGenerous);
  if (rank_ != 0) return;
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "rank 0 expected activation step=3 mb=5 f32[8, 256] from rank 1 but received "
            "activation step=4 mb=5 f32[8, 256]");
  EXPECT_EQ(channel_->abandoned_requests(), 0);
}

TEST_F(MpiDataChannelMismatchTest, ALargerShapeIsInvalidArgumentNotATruncationCrash) {
  const absl::Status status = RunMismatch({.sent_key = {.step = 3, .micro_batch = 5},
                                           .sent_shape = Shape({8, 300}),
                                           .sent_dtype = DType::kF32,
                                           .expected_key = {.step = 3, .micro_batch = 5},
                                           .expected_shape = Shape({8, 256}),
                                           .expected_dtype = DType::kF32},
                                          kGenerous);
  if (rank_ != 0) return;
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "rank 0 expected activation step=3 mb=5 f32[8, 256] from rank 1 but received "
            "activation step=3 mb=5 f32[8, 300]");
}

TEST_F(MpiDataChannelMismatchTest, ASmallerShapeIsInvalidArgumentNamingBothSides) {
  const absl::Status status =
      RunMismatch({.sent_key = {.step = 3, .micro_batch = 5, .kind = TransferKind::kGradient},
                   .sent_shape = Shape({4, 256}),
                   .sent_dtype = DType::kF32,
                   .expected_key = {.step = 3, .micro_batch = 5, .kind = TransferKind::kGradient},
                   .expected_shape = Shape({8, 256}),
                   .expected_dtype = DType::kF32},
                  kGenerous);
  if (rank_ != 0) return;
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "rank 0 expected gradient step=3 mb=5 f32[8, 256] from rank 1 but received "
            "gradient step=3 mb=5 f32[4, 256]");
}

TEST_F(MpiDataChannelMismatchTest, AnotherDtypeIsInvalidArgumentNamingBothSides) {
  const absl::Status status = RunMismatch({.sent_key = {.step = 3, .micro_batch = 5},
                                           .sent_shape = Shape({8, 256}),
                                           .sent_dtype = DType::kI64,
                                           .expected_key = {.step = 3, .micro_batch = 5},
                                           .expected_shape = Shape({8, 256}),
                                           .expected_dtype = DType::kF32},
                                          kGenerous);
  if (rank_ != 0) return;
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "rank 0 expected activation step=3 mb=5 f32[8, 256] from rank 1 but received "
            "activation step=3 mb=5 i64[8, 256]");
}

// Micro-batches travel under different tags (so receives can be posted in any order): a
// transfer for another micro-batch cannot match, and shows up as the mismatch at the deadline.
TEST_F(MpiDataChannelMismatchTest, AnotherMicroBatchIsReportedWithBothSidesAtTheDeadline) {
  const absl::Time start = absl::Now();
  const absl::Status status = RunMismatch({.sent_key = {.step = 3, .micro_batch = 6},
                                           .sent_shape = Shape({8, 16}),
                                           .sent_dtype = DType::kF32,
                                           .expected_key = {.step = 3, .micro_batch = 5},
                                           .expected_shape = Shape({8, 16}),
                                           .expected_dtype = DType::kF32},
                                          absl::Milliseconds(500));
  if (rank_ != 0) return;
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "rank 0 expected activation step=3 mb=5 f32[8, 16] from rank 1 but received "
            "activation step=3 mb=6 f32[8, 16] (nothing with the expected key arrived within "
            "0.5s)");
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(500));
}

TEST_F(MpiDataChannelTest, ReceiveDeadlineNamesThePeerWhenNobodySends) {
  if (rank_ != 0) return;
  Tensor inbox = NewTensor(Shape({4}));
  auto receive = channel_->Recv(inbox, 1, TransferKey{.step = 1, .micro_batch = 0});
  ASSERT_TRUE(receive.ok()) << receive.status();
  const absl::Time start = absl::Now();
  const absl::Status status = (*receive)->Wait(start + absl::Milliseconds(300));
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(status.message(),
            "rank 0 receiving activation step=1 mb=0 f32[4] from rank 1: no progress after 0.3s; "
            "the peer rank may be stuck or dead");
  EXPECT_GE(waited, absl::Milliseconds(300));
  EXPECT_LT(waited, absl::Seconds(10));
  // Waiting again reports the same outcome at once.
  EXPECT_EQ((*receive)->Wait(DeadlineIn(kGenerous)), status);
  EXPECT_TRUE((*receive)->Done());
  // The cancelled receive let go of the tensor.
  receive->reset();
  inbox = Tensor();
  EXPECT_EQ(channel_->abandoned_requests(), 0);
  EXPECT_EQ(allocator_.live_bytes(), 0);
}

// A send nobody receives cannot be cancelled in MPI: after its deadline the channel keeps the
// tensor alive until the peer finally takes it, so MPI never reads freed memory.
TEST_F(MpiDataChannelTest, AnAbandonedSendKeepsItsTensorUntilMpiReleasesIt) {
  // Between ranks 0 and 1; the others only join the barrier in the middle.
  const Shape shape({16, 1024});  // 64 KiB: too big for an eager send
  const TransferKey key{.step = 7, .micro_batch = 2};
  if (rank_ == 0) {
    {
      Tensor outgoing = NewTensor(shape);
      FillKeyed(outgoing, rank_, 2);
      auto send = channel_->Send(outgoing, 1, key);
      ASSERT_TRUE(send.ok()) << send.status();
      const absl::Status status = (*send)->Wait(DeadlineIn(absl::Milliseconds(300)));
      EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
      EXPECT_THAT(std::string(status.message()),
                  StartsWith("rank 0 sending activation step=7 mb=2 f32[16, 1024] to rank 1: no "
                             "progress after 0.3s"));
    }
    EXPECT_GT(channel_->abandoned_requests(), 0);
    EXPECT_EQ(allocator_.live_bytes(), shape.num_elements() * 4);
  }
  SyncRanks();
  if (rank_ == 1) {
    Tensor inbox = NewTensor(shape);
    auto receive = channel_->Recv(inbox, 0, key);
    ASSERT_TRUE(receive.ok()) << receive.status();
    ASSERT_TRUE((*receive)->Wait(DeadlineIn(kGenerous)).ok());
    EXPECT_EQ(CountKeyedMismatches(inbox, 0, 2), 0);
  } else if (rank_ == 0) {
    const absl::Time give_up = DeadlineIn(kGenerous);
    while (channel_->abandoned_requests() > 0 && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    EXPECT_EQ(channel_->abandoned_requests(), 0);
    EXPECT_EQ(allocator_.live_bytes(), 0);
  }
}

TEST_F(MpiDataChannelTest, ASendHandleKeepsItsTensorAliveUntilDone) {
  if (rank_ > 1) GTEST_SKIP() << "between ranks 0 and 1";
  const Shape shape({16, 1024});
  const TransferKey key{.step = 1, .micro_batch = 3};
  if (rank_ == 0) {
    std::unique_ptr<TransferHandle> send;
    {
      Tensor outgoing = NewTensor(shape);
      FillKeyed(outgoing, rank_, 3);
      auto started = channel_->Send(outgoing, 1, key);
      ASSERT_TRUE(started.ok()) << started.status();
      send = *std::move(started);
    }
    EXPECT_EQ(allocator_.live_bytes(), shape.num_elements() * 4);
    ASSERT_TRUE(send->Wait(DeadlineIn(kGenerous)).ok());
    EXPECT_EQ(allocator_.live_bytes(), 0) << "the finished handle let go of the tensor";
  } else {
    Tensor inbox = NewTensor(shape);
    auto receive = channel_->Recv(inbox, 0, key);
    ASSERT_TRUE(receive.ok()) << receive.status();
    ASSERT_TRUE((*receive)->Wait(DeadlineIn(kGenerous)).ok());
    EXPECT_EQ(CountKeyedMismatches(inbox, 0, 3), 0);
  }
}

TEST_F(MpiDataChannelTest, DestroyingAnUnfinishedReceiveCancelsItSoTheNextOneGetsTheData) {
  // Between ranks 0 and 1; the others only join the barrier in the middle.
  const TransferKey key{.step = 2, .micro_batch = 9};
  if (rank_ == 0) {
    Tensor early = NewTensor(Shape({8, 256}));
    auto receive = channel_->Recv(early, 1, key);
    ASSERT_TRUE(receive.ok()) << receive.status();
    EXPECT_FALSE((*receive)->Done());
    receive->reset();
    early = Tensor();
    EXPECT_EQ(channel_->abandoned_requests(), 0);
    EXPECT_EQ(allocator_.live_bytes(), 0);
  }
  SyncRanks();
  if (rank_ == 1) {
    Tensor outgoing = NewTensor(Shape({8, 256}));
    FillKeyed(outgoing, rank_, 9);
    auto send = channel_->Send(outgoing, 0, key);
    ASSERT_TRUE(send.ok()) << send.status();
    EXPECT_TRUE((*send)->Wait(DeadlineIn(kGenerous)).ok());
  } else if (rank_ == 0) {
    Tensor inbox = NewTensor(Shape({8, 256}));
    auto receive = channel_->Recv(inbox, 1, key);
    ASSERT_TRUE(receive.ok()) << receive.status();
    ASSERT_TRUE((*receive)->Wait(DeadlineIn(kGenerous)).ok());
    EXPECT_EQ(CountKeyedMismatches(inbox, 1, 9), 0);
  }
}

TEST_F(MpiDataChannelTest, DoneTurnsTrueOnceTheTransferCompletes) {
  if (rank_ > 1) GTEST_SKIP() << "between ranks 0 and 1";
  const TransferKey key{.step = 4, .micro_batch = 1, .chunk = 1};
  if (rank_ == 1) {
    Tensor outgoing = NewTensor(Shape({3, 333}));
    FillKeyed(outgoing, rank_, 1);
    auto send = channel_->Send(outgoing, 0, key);
    ASSERT_TRUE(send.ok()) << send.status();
    EXPECT_TRUE((*send)->Wait(DeadlineIn(kGenerous)).ok());
    return;
  }
  Tensor inbox = NewTensor(Shape({3, 333}));
  auto receive = channel_->Recv(inbox, 1, key);
  ASSERT_TRUE(receive.ok()) << receive.status();
  const absl::Time give_up = DeadlineIn(kGenerous);
  while (!(*receive)->Done() && absl::Now() < give_up) absl::SleepFor(absl::Microseconds(200));
  ASSERT_TRUE((*receive)->Done());
  // A finished handle answers at once, whatever the deadline.
  EXPECT_TRUE((*receive)->Wait(absl::InfinitePast()).ok());
  EXPECT_EQ(CountKeyedMismatches(inbox, 1, 1), 0);
}

TEST_F(MpiDataChannelTest, BadRequestsAreRejectedBeforeAnythingIsSent) {
  Tensor tensor = NewTensor(Shape({4}));
  auto no_such_peer = channel_->Send(tensor, size_, TransferKey{});
  EXPECT_EQ(no_such_peer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_such_peer.status().message()), HasSubstr("no such rank"));

  auto huge_micro_batch = channel_->Recv(tensor, next(), TransferKey{.micro_batch = 1 << 21});
  EXPECT_EQ(huge_micro_batch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(huge_micro_batch.status().message()),
              HasSubstr("cannot be encoded in an MPI tag"));

  Tensor nine_dims = NewTensor(Shape({1, 1, 1, 1, 1, 1, 1, 1, 2}));
  EXPECT_EQ(channel_->Send(nine_dims, next(), TransferKey{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  Tensor undefined;
  EXPECT_EQ(channel_->Recv(undefined, next(), TransferKey{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(channel_->abandoned_requests(), 0);
}

}  // namespace
}  // namespace gpipe
