#include "launcher/stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace gpipe {
namespace {

TEST(StopSignalsTest, SighupAndSigquitAreStopRequests) {
  for (int signo : {SIGHUP, SIGQUIT, SIGINT, SIGTERM, SIGUSR1}) {
    auto signals = StopSignals::Install("stop_signals_test");
    ASSERT_TRUE(signals.ok()) << signals.status();
    EXPECT_FALSE((*signals)->requested());
    ::raise(signo);
    EXPECT_TRUE((*signals)->requested());
    EXPECT_EQ((*signals)->signal(), signo);
  }
}

TEST(StopSignalsTest, ASignalPendingBeforeInstallIsRecorded) {
  sigset_t quit;
  sigemptyset(&quit);
  sigaddset(&quit, SIGQUIT);
  ASSERT_EQ(::sigprocmask(SIG_BLOCK, &quit, nullptr), 0);
  ::raise(SIGQUIT);  // blocked: pending, as when it came before exec
  auto signals = StopSignals::Install("stop_signals_test");
  ASSERT_TRUE(signals.ok()) << signals.status();
  EXPECT_EQ((*signals)->signal(), SIGQUIT);
}

TEST(StopSignalsTest, ReassertTakesBackReplacedHandlers) {
  auto signals = StopSignals::Install("stop_signals_test");
  ASSERT_TRUE(signals.ok()) << signals.status();
  EXPECT_EQ((*signals)->Reassert(), 0);
  ::signal(SIGUSR1, SIG_DFL);  // as a library's initialization might
  EXPECT_EQ((*signals)->Reassert(), 1);
  ::raise(SIGUSR1);  // would end the process under SIG_DFL
  EXPECT_EQ((*signals)->signal(), SIGUSR1);
}

// Slurm's pre-emption: SIGTERM reaches the rank, then gpipe-run's forwarded SIGUSR1. The process
// is still running (a second signal would have ended it) and the request is SIGTERM's.
TEST(StopSignalsTest, AForwardedSigusr1AfterARequestIsNotASecondSignal) {
  auto signals = StopSignals::Install("stop_signals_test");
  ASSERT_TRUE(signals.ok()) << signals.status();
  ::raise(SIGTERM);
  ::raise(SIGUSR1);
  ::raise(SIGUSR1);
  EXPECT_TRUE((*signals)->requested());
  EXPECT_EQ((*signals)->signal(), SIGTERM);
}

// A second SIGTERM still ends the process at once, with 128 + its number.
TEST(StopSignalsTest, ASecondTerminationSignalEndsTheProcess) {
  EXPECT_EXIT(
      {
        auto signals = StopSignals::Install("stop_signals_test");
        if (!signals.ok()) ::_exit(1);
        ::raise(SIGUSR1);
        ::raise(SIGTERM);
        ::_exit(0);
      },
      ::testing::ExitedWithCode(128 + SIGTERM), "second signal \\(SIGTERM\\)");
}

// While the handler runs every stop signal is blocked, so a second one cannot interrupt it
// between counting and recording the first.
TEST(StopSignalsTest, TheHandlerBlocksEveryStopSignal) {
  auto signals = StopSignals::Install("stop_signals_test");
  ASSERT_TRUE(signals.ok()) << signals.status();
  ::signal(SIGHUP, SIG_DFL);
  EXPECT_EQ((*signals)->Reassert(), 1);
  for (int signo : StopSignals::kSignals) {
    struct sigaction current {};
    ASSERT_EQ(::sigaction(signo, nullptr, &current), 0);
    for (int blocked : StopSignals::kSignals) {
      EXPECT_EQ(sigismember(&current.sa_mask, blocked), 1)
          << StopSignals::Name(signo) << " does not block " << StopSignals::Name(blocked);
    }
  }
}

TEST(StopSignalsTest, NamesTheSignals) {
  EXPECT_STREQ(StopSignals::Name(SIGHUP), "SIGHUP");
  EXPECT_STREQ(StopSignals::Name(SIGQUIT), "SIGQUIT");
  EXPECT_STREQ(StopSignals::Name(SIGKILL), "a signal");
}

}  // namespace
}  // namespace gpipe
