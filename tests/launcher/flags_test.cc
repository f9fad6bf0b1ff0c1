// The programs' number flags: a wait or a byte count outside what the code can represent is
// refused with the flag's name and the allowed range, instead of wrapping into a deadline
// already past or a limit reported as "< 1".
#include "launcher/flags.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace gpipe {
namespace {

TEST(ParseSecondsFlagTest, AcceptsWaitsUpToAMillionSeconds) {
  EXPECT_EQ(*ParseSecondsFlag("--startup-timeout", "0.5"), 0.5);
  EXPECT_EQ(*ParseSecondsFlag("--startup-timeout", "120"), 120);
  EXPECT_EQ(*ParseSecondsFlag("--startup-timeout", "1e6"), 1e6);
}

TEST(ParseSecondsFlagTest, RefusesWaitsTheDeadlineCannotHoldNamingTheRange) {
  for (const char* value : {"1e10", "1e300", "1000000.5", "inf", "nan", "0", "-1", "soon"}) {
    SCOPED_TRACE(value);
    const absl::StatusOr<double> parsed = ParseSecondsFlag("--startup-timeout", value);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().message(),
              absl::StrCat("flag --startup-timeout needs a number of seconds > 0 and <= 1000000, "
                           "got '",
                           value, "'"));
  }
}

TEST(ParseByteCountFlagTest, AcceptsByteCountsUpToOneExbibyte) {
  EXPECT_EQ(*ParseByteCountFlag("--memory-limit", "1"), 1);
  EXPECT_EQ(*ParseByteCountFlag("--memory-limit", "1152921504606846976"), int64_t{1} << 60);
}

TEST(ParseByteCountFlagTest, RefusesCountsBeyondOneExbibyteNamingTheRange) {
  for (const char* value : {"1152921504606846977", "9223372036854775807", "99999999999999999999",
                            "1e20", "0", "-5", "lots"}) {
    SCOPED_TRACE(value);
    const absl::StatusOr<int64_t> parsed = ParseByteCountFlag("--memory-limit", value);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().message(),
              absl::StrCat("flag --memory-limit needs a whole number of bytes from 1 to "
                           "1152921504606846976 (1 EiB), got '",
                           value, "'"));
  }
}

TEST(ParseProcessCountFlagTest, AcceptsOneToAMebiProcesses) {
  EXPECT_EQ(*ParseProcessCountFlag("-n", "1"), 1);
  EXPECT_EQ(*ParseProcessCountFlag("-n", "1048576"), 1 << 20);
}

// 4294967298 once passed the world-size check as 2 (cast to int) while mpirun got all of it.
TEST(ParseProcessCountFlagTest, RefusesCountsOutsideTheRangeNamingIt) {
  for (const char* value : {"4294967298", "1048577", "0", "-2", "two"}) {
    SCOPED_TRACE(value);
    const absl::StatusOr<int> parsed = ParseProcessCountFlag("-n", value);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().message(),
              absl::StrCat("flag -n needs a whole number of processes from 1 to 1048576, got '",
                           value, "'"));
  }
}

}  // namespace
}  // namespace gpipe
