#include "gtest/gtest.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckEven(int x) {
  RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusMacrosTest, PropagateErrorsAndValues) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().message(), "odd");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(3).code(), absl::StatusCode::kInvalidArgument);
}

TEST(StatusMacrosTest, WithContextPrefixesAndKeepsCode) {
  const absl::Status s = WithContext(absl::NotFoundError("x"), "stage 2");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "stage 2: x");
  EXPECT_TRUE(WithContext(absl::OkStatus(), "ctx").ok());
}

}  // namespace
}  // namespace gpipe
