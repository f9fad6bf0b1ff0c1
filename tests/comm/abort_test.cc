// Job aborts: ControlChannel::NotifyAbort reaching ranks blocked in control and data waits
// (run with 3 ranks).
#include <mpi.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/control.pb.h"
#include "runtime/comm/control_channel.h"
#include "runtime/comm/mpi_data_channel.h"
#include "tests/comm/mpi_test_support.h"

namespace gpipe {
namespace {

using ::gpipe::testing::CountingHostAllocator;
using ::gpipe::testing::DeadlineIn;
using ::gpipe::testing::SyncRanks;
using ::testing::AnyOf;
using ::testing::Optional;

constexpr absl::Duration kLongWait = absl::Seconds(30);
constexpr absl::Duration kPrompt = absl::Seconds(10);

// The waiting ranks tell the aborting rank they are about to block, on a communicator of the
// test's own; it aborts once every one has said so (ordered by messages, not by a sleep). A wait
// entered just after the abort still ends with it (the abort is sticky), so the test holds
// either way.
class ReadySignal {
 public:
  ReadySignal() { MPI_Comm_dup(MPI_COMM_WORLD, &comm_); }
  ~ReadySignal() { MPI_Comm_free(&comm_); }
  ReadySignal(const ReadySignal&) = delete;
  ReadySignal& operator=(const ReadySignal&) = delete;

  void Tell(int rank) { MPI_Send(nullptr, 0, MPI_BYTE, rank, kTag, comm_); }
  // Whether `count` ranks said so before `deadline`.
  bool AwaitFrom(int count, absl::Time deadline) {
    for (int heard = 0; heard < count; ++heard) {
      MPI_Request request;
      MPI_Irecv(nullptr, 0, MPI_BYTE, MPI_ANY_SOURCE, kTag, comm_, &request);
      int done = 0;
      while (MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
        if (absl::Now() > deadline) {
          MPI_Cancel(&request);
          MPI_Wait(&request, MPI_STATUS_IGNORE);
          return false;
        }
        absl::SleepFor(absl::Microseconds(100));
      }
    }
    return true;
  }

 private:
  static constexpr int kTag = 7;
  MPI_Comm comm_ = MPI_COMM_NULL;
};

class AbortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rank_ = gpipe::testing::WorldRank();
    size_ = gpipe::testing::WorldSize();
    absl::StatusOr<std::unique_ptr<ControlChannel>> control =
        ControlChannel::Create(MPI_COMM_WORLD, nullptr);
    ASSERT_TRUE(control.ok()) << control.status();
    control_ = std::move(*control);
    ControlChannel* control_channel = control_.get();
    absl::StatusOr<std::unique_ptr<MpiDataChannel>> data = MpiDataChannel::Create(
        MPI_COMM_WORLD, [control_channel] { return control_channel->PollAbort(); }, nullptr);
    ASSERT_TRUE(data.ok()) << data.status();
    data_ = std::move(*data);
    // Nobody aborts before every rank has its channels (an abort would, rightly, end another
    // rank's channel setup).
    SyncRanks();
  }
  void TearDown() override { SyncRanks(); }

  int rank_ = 0;
  int size_ = 0;
  CountingHostAllocator allocator_;
  std::unique_ptr<ControlChannel> control_;
  std::unique_ptr<MpiDataChannel> data_;
};

TEST_F(AbortTest, AnAbortInterruptsBlockedDataAndControlWaitsOnOtherRanks) {
  const std::string expected = "rank 1 aborted the job: stage 1 failed: out of memory";
  ReadySignal ready;
  if (rank_ == 1) {
    EXPECT_TRUE(ready.AwaitFrom(size_ - 1, DeadlineIn(kPrompt)));
    control_->NotifyAbort("stage 1 failed: out of memory");
    EXPECT_THAT(control_->PollAbort(), Optional(expected));
    return;
  }
  const absl::Time start = absl::Now();
  absl::Status status;
  if (rank_ == 0) {
    // Blocked on an activation rank 1 will never send.
    absl::StatusOr<Tensor> inbox =
        Tensor::Empty(allocator_, Shape({8, 256}), DType::kF32, MemoryKind::kBoundary);
    ASSERT_TRUE(inbox.ok());
    auto receive = data_->Recv(*inbox, 1, TransferKey{.step = 2, .micro_batch = 0});
    ASSERT_TRUE(receive.ok()) << receive.status();
    ready.Tell(1);
    status = (*receive)->Wait(start + kLongWait);
  } else {
    // Blocked on a step command rank 0 will never send.
    pb::StepCommand command;
    ready.Tell(1);
    status = control_->Recv(0, kControlTagStepCommand, command, start + kLongWait);
  }
  EXPECT_LT(absl::Now() - start, kPrompt);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(status.message(), expected);
  // Sticky: every later poll says the same.
  EXPECT_THAT(control_->PollAbort(), Optional(expected));
  EXPECT_THAT(control_->PollAbort(), Optional(expected));
}

TEST_F(AbortTest, NotifyAbortReturnsPromptlyWhenNobodyIsListening) {
  if (rank_ == 0) {
    const absl::Time start = absl::Now();
    control_->NotifyAbort("plan rejected");
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  }
  SyncRanks();
  if (rank_ != 0) {
    EXPECT_THAT(control_->PollAbort(),
                Optional(std::string("rank 0 aborted the job: plan rejected")));
  }
}

TEST_F(AbortTest, NoAbortIsReportedWhileNobodyHasAborted) {
  EXPECT_EQ(control_->PollAbort(), std::nullopt);
}

TEST_F(AbortTest, TheFirstAbortSeenSticksAndEndsLaterWaitsAtOnce) {
  if (size_ < 3) GTEST_SKIP() << "needs 3 ranks";
  if (rank_ == 1 || rank_ == 2) control_->NotifyAbort(absl::StrCat("rank ", rank_, " gave up"));
  SyncRanks();
  if (rank_ != 0) return;
  const std::optional<std::string> first = control_->PollAbort();
  EXPECT_THAT(first, Optional(AnyOf(std::string("rank 1 aborted the job: rank 1 gave up"),
                                    std::string("rank 2 aborted the job: rank 2 gave up"))));
  EXPECT_EQ(control_->PollAbort(), first);
  pb::StepReport report;
  const absl::Time start = absl::Now();
  const absl::Status status = control_->Recv(1, kControlTagStepReport, report, start + kLongWait);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(status.message(), *first);
  EXPECT_LT(absl::Now() - start, kPrompt);
}

}  // namespace
}  // namespace gpipe
