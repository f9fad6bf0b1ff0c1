// ControlChannel between real MPI ranks (run with 3 ranks), plus MpiStatus and MpiEnvironment.
#include "runtime/comm/control_channel.h"

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/control.pb.h"
#include "runtime/comm/mpi_environment.h"
#include "runtime/comm/mpi_status.h"
#include "tests/comm/mpi_test_support.h"

namespace gpipe {
namespace {

using ::gpipe::testing::DeadlineIn;
using ::gpipe::testing::SyncRanks;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr absl::Duration kGenerous = absl::Seconds(20);

class ControlChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rank_ = gpipe::testing::WorldRank();
    size_ = gpipe::testing::WorldSize();
    absl::StatusOr<std::unique_ptr<ControlChannel>> channel =
        ControlChannel::Create(MPI_COMM_WORLD, nullptr);
    ASSERT_TRUE(channel.ok()) << channel.status();
    channel_ = std::move(*channel);
  }
  void TearDown() override { SyncRanks(); }

  int rank_ = 0;
  int size_ = 0;
  std::unique_ptr<ControlChannel> channel_;
};

pb::StepReport ReportOf(int rank) {
  pb::StepReport report;
  report.set_rank(rank);
  report.set_stage(rank);
  report.set_step(41);
  report.set_loss(0.25 * rank);
  report.set_non_finite(rank == 2);
  report.set_peak_bytes(int64_t{1} << (30 + rank));
  report.set_current_bytes(rank == 1 ? 0 : 3000 * rank);
  return report;
}

void ExpectReportOf(const pb::StepReport& report, int rank) {
  const pb::StepReport expected = ReportOf(rank);
  EXPECT_EQ(report.rank(), rank);
  EXPECT_EQ(report.stage(), rank);
  EXPECT_EQ(report.step(), 41);
  EXPECT_EQ(report.loss(), expected.loss());
  EXPECT_EQ(report.non_finite(), expected.non_finite());
  EXPECT_EQ(report.peak_bytes(), expected.peak_bytes());
  EXPECT_EQ(report.current_bytes(), expected.current_bytes());
}

TEST_F(ControlChannelTest, SendAndRecvCarryAStepReportExactly) {
  EXPECT_EQ(channel_->rank(), rank_);
  EXPECT_EQ(channel_->size(), size_);
  if (rank_ != 0) {
    ASSERT_TRUE(
        channel_->Send(0, kControlTagStepReport, ReportOf(rank_), DeadlineIn(kGenerous)).ok());
    return;
  }
  // Received in reverse rank order: a message waits for its receive.
  for (int peer = size_ - 1; peer >= 1; --peer) {
    pb::StepReport report;
    const absl::Status status =
        channel_->Recv(peer, kControlTagStepReport, report, DeadlineIn(kGenerous));
    ASSERT_TRUE(status.ok()) << status;
    ExpectReportOf(report, peer);
  }
}

TEST_F(ControlChannelTest, MessagesFromOnePeerWithOneTagArriveInOrder) {
  constexpr int kMessages = 20;
  if (rank_ == 0) {
    for (int peer = 1; peer < size_; ++peer) {
      for (int step = 0; step < kMessages; ++step) {
        pb::StepCommand command;
        command.set_step(step);
        for (int i = 0; i < step; ++i) command.add_sample_indices(peer * 1000 + i);
        ASSERT_TRUE(
            channel_->Send(peer, kControlTagStepCommand, command, DeadlineIn(kGenerous)).ok());
      }
    }
    return;
  }
  for (int step = 0; step < kMessages; ++step) {
    pb::StepCommand command;
    ASSERT_TRUE(channel_->Recv(0, kControlTagStepCommand, command, DeadlineIn(kGenerous)).ok());
    EXPECT_EQ(command.step(), step);
    ASSERT_EQ(command.sample_indices_size(), step);
    for (int i = 0; i < step; ++i) EXPECT_EQ(command.sample_indices(i), rank_ * 1000 + i);
  }
}

TEST_F(ControlChannelTest, BroadcastDeliversRankZerosMessageToEveryRank) {
  pb::StepCommand command;
  if (rank_ == 0) {
    command.set_step(7);
    command.set_lr(0.05);
    for (int i = 0; i < 100; ++i) command.add_sample_indices(3 * i + 1);
  }
  ASSERT_TRUE(channel_->Broadcast(command, DeadlineIn(kGenerous)).ok());
  EXPECT_EQ(command.step(), 7);
  EXPECT_EQ(command.lr(), 0.05);
  ASSERT_EQ(command.sample_indices_size(), 100);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(command.sample_indices(i), 3 * i + 1);
  EXPECT_FALSE(command.pause());

  // A second broadcast on another tag, e.g. the step decision.
  pb::StepDecision decision;
  if (rank_ == 0) {
    decision.set_step(7);
    decision.set_apply(false);
  }
  ASSERT_TRUE(channel_->Broadcast(decision, DeadlineIn(kGenerous), kControlTagDecision).ok());
  EXPECT_EQ(decision.step(), 7);
  ASSERT_TRUE(decision.has_apply());
  EXPECT_FALSE(decision.apply());
}

TEST_F(ControlChannelTest, GatherToRootCarriesLargeMessagesExactly) {
  // Parameter shards of a few hundred KiB: far beyond MPI's eager limit.
  pb::ParameterShard shard;
  shard.set_rank(rank_);
  pb::NamedTensor* tensor = shard.add_tensors();
  tensor->set_name(absl::StrCat("fc", rank_, ".weight"));
  std::string bytes(100'000 * (rank_ + 1), '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 31 + rank_) % 251);
  tensor->set_f32_data(bytes);
  absl::StatusOr<std::vector<std::string>> gathered =
      channel_->GatherToRoot(shard, DeadlineIn(kGenerous), kControlTagExport);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  if (rank_ != 0) return;
  ASSERT_EQ(static_cast<int>(gathered->size()), size_);
  for (int rank = 0; rank < size_; ++rank) {
    pb::ParameterShard received;
    ASSERT_TRUE(received.ParseFromString((*gathered)[rank]));
    EXPECT_EQ(received.rank(), rank);
    ASSERT_EQ(received.tensors_size(), 1);
    EXPECT_EQ(received.tensors(0).name(), absl::StrCat("fc", rank, ".weight"));
    const std::string& data = received.tensors(0).f32_data();
    ASSERT_EQ(data.size(), 100'000u * (rank + 1));
    int64_t mismatches = 0;
    for (size_t i = 0; i < data.size(); ++i) {
      mismatches += data[i] != static_cast<char>((i * 31 + rank) % 251);
    }
    EXPECT_EQ(mismatches, 0) << "rank " << rank;
  }
}

TEST_F(ControlChannelTest, GatherToRootReturnsEveryRanksMessageInRankOrder) {
  absl::StatusOr<std::vector<std::string>> gathered =
      channel_->GatherToRoot(ReportOf(rank_), DeadlineIn(kGenerous));
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  if (rank_ != 0) {
    EXPECT_TRUE(gathered->empty());
    return;
  }
  ASSERT_EQ(static_cast<int>(gathered->size()), size_);
  for (int rank = 0; rank < size_; ++rank) {
    pb::StepReport report;
    ASSERT_TRUE(report.ParseFromString((*gathered)[rank])) << rank;
    ExpectReportOf(report, rank);
  }
}

TEST_F(ControlChannelTest, ReceivingAnotherMessageTypeFailsNamingBothTypes) {
  if (rank_ == 1) {
    pb::StepDecision decision;
    decision.set_step(3);
    ASSERT_TRUE(channel_->Send(0, kControlTagDecision, decision, DeadlineIn(kGenerous)).ok());
  }
  if (rank_ != 0) return;
  pb::StepReport report;
  const absl::Status status = channel_->Recv(1, kControlTagDecision, report, DeadlineIn(kGenerous));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "rank 0 receiving gpipe.pb.StepReport from rank 1 (step decision): expected "
            "gpipe.pb.StepReport but received gpipe.pb.StepDecision");
}

TEST_F(ControlChannelTest, ReceiveDeadlineNamesThePeerAndTheTag) {
  if (rank_ != 0) return;
  const int peer = size_ - 1;
  pb::StepReport report;
  const absl::Time start = absl::Now();
  const absl::Status status =
      channel_->Recv(peer, kControlTagStepReport, report, start + absl::Milliseconds(300));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(status.message(),
            absl::StrCat("rank 0 receiving gpipe.pb.StepReport from rank ", peer,
                         " (step report): no progress after 0.3s; the peer rank may be stuck or "
                         "dead"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST_F(ControlChannelTest, GatherDeadlineNamesTheRanksNotHeardFrom) {
  const int silent = size_ - 1;
  if (rank_ == silent) return;
  absl::StatusOr<std::vector<std::string>> gathered = channel_->GatherToRoot(
      ReportOf(rank_), rank_ == 0 ? DeadlineIn(absl::Milliseconds(500)) : DeadlineIn(kGenerous));
  if (rank_ != 0) {
    EXPECT_TRUE(gathered.ok()) << gathered.status();
    return;
  }
  EXPECT_EQ(gathered.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(gathered.status().message()),
              StartsWith(absl::StrCat("rank 0 gathering gpipe.pb.StepReport (gather); still "
                                      "waiting for ranks [",
                                      silent, "]: no progress after 0.5s")));
}

TEST_F(ControlChannelTest, BadPeersAndTheReservedAbortTagAreRejected) {
  pb::StepReport report;
  absl::Status status = channel_->Send(size_, kControlTagStepReport, report, DeadlineIn(kGenerous));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("is not in the job"));
  status = channel_->Recv(-1, kControlTagStepReport, report, DeadlineIn(kGenerous));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  status = channel_->Send(0, kControlTagAbort, report, DeadlineIn(kGenerous));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("reserved for NotifyAbort"));
  EXPECT_EQ(channel_->Recv(0, -5, report, DeadlineIn(kGenerous)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ControlChannelTest, TagNamesReadAsTheProtocolStep) {
  EXPECT_EQ(ControlTagName(kControlTagSetup), "setup");
  EXPECT_EQ(ControlTagName(kControlTagStepReport), "step report");
  EXPECT_EQ(ControlTagName(kControlTagDecision), "step decision");
  EXPECT_EQ(ControlTagName(99), "tag 99");
}

TEST(MpiStatusTest, NamesTheCallAndMpisReasonWithAFittingCode) {
  EXPECT_TRUE(MpiStatus(MPI_SUCCESS, "MPI_Send").ok());
  const absl::Status truncated = MpiStatus(MPI_ERR_TRUNCATE, "MPI_Recv");
  EXPECT_EQ(truncated.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(truncated.message()), StartsWith("MPI_Recv: MPI_ERR_TRUNCATE"));
  EXPECT_EQ(MpiStatus(MPI_ERR_RANK, "MPI_Isend").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MpiStatus(MPI_ERR_INTERN, "MPI_Test").code(), absl::StatusCode::kInternal);
}

TEST(MpiEnvironmentTest, InitFailsWhenMpiIsAlreadyRunning) {
  int argc = 0;
  char** argv = nullptr;
  const absl::StatusOr<std::unique_ptr<MpiEnvironment>> environment =
      MpiEnvironment::Init(&argc, &argv);
  EXPECT_EQ(environment.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gpipe
