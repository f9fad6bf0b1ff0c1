// PollUntil's deadline, abort and back-off logic, on a fake clock (no MPI, no real waiting).
#include "runtime/comm/wait.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/comm/fake_clock.h"

namespace gpipe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Describe() { return "rank 2 receiving activation step=3 mb=5 from rank 1"; }

TEST(PollUntilTest, SucceedsOnThePollThatReportsDone) {
  FakeClock clock;
  int polls = 0;
  const absl::Status status =
      PollUntil([&]() -> absl::StatusOr<bool> { return ++polls == 4; },
                clock.Now() + absl::Seconds(1), AbortPoller(), clock, Describe);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(polls, 4);
  EXPECT_EQ(clock.sleeps().size(), 3u);
}

TEST(PollUntilTest, WorkAlreadyDoneSucceedsEvenPastTheDeadline) {
  FakeClock clock;
  const absl::Status status =
      PollUntil([]() -> absl::StatusOr<bool> { return true; }, clock.Now() - absl::Seconds(5),
                AbortPoller(), clock, Describe);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(clock.sleeps().empty());
}

TEST(PollUntilTest, DeadlineExceededNamesWhatWasAwaitedAndHowLong) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  const absl::Status status =
      PollUntil([]() -> absl::StatusOr<bool> { return false; }, start + absl::Milliseconds(300),
                AbortPoller(), clock, Describe);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(status.message(),
            "rank 2 receiving activation step=3 mb=5 from rank 1: no progress after 0.3s; the "
            "peer rank may be stuck or dead");
  // It gave up exactly at the deadline: the last sleep was cut short to land on it.
  EXPECT_EQ(clock.Now(), start + absl::Milliseconds(300));
}

TEST(PollUntilTest, ALateWakeUpStillReportsTheTimeTheWaitWasAllowed) {
  FakeClock clock;
  clock.set_oversleep(absl::Milliseconds(400));
  const absl::Status status =
      PollUntil([]() -> absl::StatusOr<bool> { return false; },
                clock.Now() + absl::Milliseconds(300), AbortPoller(), clock, Describe);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(status.message()), HasSubstr("no progress after 0.3s"));
  EXPECT_EQ(clock.sleeps().size(), 1u);
}

TEST(PollUntilTest, SleepsBackOffFrom20MicrosecondsDoublingTo100Microseconds) {
  FakeClock clock;
  (void)PollUntil([]() -> absl::StatusOr<bool> { return false; },
                  clock.Now() + absl::Microseconds(20 + 40 + 80 + 100 + 100), AbortPoller(),
                  clock, Describe);
  EXPECT_THAT(clock.sleeps(),
              ElementsAre(absl::Microseconds(20), absl::Microseconds(40), absl::Microseconds(80),
                          absl::Microseconds(100), absl::Microseconds(100)));
}

TEST(PollUntilTest, NeverSleepsPastTheDeadline) {
  FakeClock clock;
  const absl::Time deadline = clock.Now() + absl::Microseconds(50);
  (void)PollUntil([]() -> absl::StatusOr<bool> { return false; }, deadline, AbortPoller(), clock,
                  Describe);
  EXPECT_THAT(clock.sleeps(), ElementsAre(absl::Microseconds(20), absl::Microseconds(30)));
}

TEST(PollUntilTest, AnAbortSeenByThePollerEndsTheWaitWithItsMessage) {
  FakeClock clock;
  int abort_polls = 0;
  const AbortPoller poller = [&]() -> std::optional<std::string> {
    if (++abort_polls < 3) return std::nullopt;
    return "rank 1 aborted the job: stage 1 ran out of memory";
  };
  const absl::Status status = PollUntil([]() -> absl::StatusOr<bool> { return false; },
                                        clock.Now() + absl::Hours(1), poller, clock, Describe);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(status.message(), "rank 1 aborted the job: stage 1 ran out of memory");
  EXPECT_EQ(abort_polls, 3);
}

TEST(PollUntilTest, CompletionWinsOverAPendingAbort) {
  FakeClock clock;
  const AbortPoller poller = []() -> std::optional<std::string> { return "rank 3 aborted"; };
  const absl::Status status = PollUntil([]() -> absl::StatusOr<bool> { return true; },
                                        clock.Now() + absl::Seconds(1), poller, clock, Describe);
  EXPECT_TRUE(status.ok()) << status;
}

TEST(PollUntilTest, AnErrorFromThePollIsReturnedUnchanged) {
  FakeClock clock;
  int polls = 0;
  const absl::Status status = PollUntil(
      [&]() -> absl::StatusOr<bool> {
        if (++polls == 2) return absl::DataLossError("MPI_Test: message truncated");
        return false;
      },
      clock.Now() + absl::Seconds(1), AbortPoller(), clock, Describe);
  EXPECT_EQ(status, absl::DataLossError("MPI_Test: message truncated"));
}

TEST(PollUntilTest, DescriptionIsBuiltOnlyWhenTheDeadlinePasses) {
  FakeClock clock;
  int described = 0;
  const auto describe = [&] {
    ++described;
    return std::string("gathering reports; still waiting for ranks [2]");
  };
  EXPECT_TRUE(PollUntil([]() -> absl::StatusOr<bool> { return true; }, clock.Now(), AbortPoller(),
                        clock, describe)
                  .ok());
  EXPECT_EQ(described, 0);
  const absl::Status status =
      PollUntil([]() -> absl::StatusOr<bool> { return false; }, clock.Now() + absl::Seconds(2),
                AbortPoller(), clock, describe);
  EXPECT_EQ(described, 1);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("still waiting for ranks [2]: no progress after 2.0s"));
}

}  // namespace
}  // namespace gpipe
