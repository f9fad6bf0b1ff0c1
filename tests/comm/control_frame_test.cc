// Control messages on the wire: type name + bytes, and the errors a receiver reports.
#include "runtime/comm/control_frame.h"

#include <string>

#include "gtest/gtest.h"
#include "proto/control.pb.h"

namespace gpipe {
namespace {

constexpr char kContext[] = "rank 0 receiving gpipe.pb.StepReport from rank 2 (step report)";

TEST(ControlFrameTest, RoundTripsAMessage) {
  pb::StepReport report;
  report.set_rank(2);
  report.set_step(17);
  report.set_loss(0.625);
  report.set_non_finite(true);
  report.set_peak_bytes(int64_t{1} << 40);
  absl::StatusOr<std::string> frame = EncodeFrame(report);
  ASSERT_TRUE(frame.ok()) << frame.status();
  pb::StepReport decoded;
  ASSERT_TRUE(DecodeFrame(*frame, decoded, kContext).ok());
  EXPECT_EQ(decoded.rank(), 2);
  EXPECT_EQ(decoded.step(), 17);
  EXPECT_EQ(decoded.loss(), 0.625);
  EXPECT_TRUE(decoded.non_finite());
  EXPECT_EQ(decoded.peak_bytes(), int64_t{1} << 40);
}

TEST(ControlFrameTest, AnotherMessageTypeIsInvalidArgumentNamingBothTypes) {
  pb::StepCommand command;
  command.set_step(3);
  absl::StatusOr<std::string> frame = EncodeFrame(command);
  ASSERT_TRUE(frame.ok());
  pb::StepReport report;
  const absl::Status status = DecodeFrame(*frame, report, kContext);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), std::string(kContext) +
                                  ": expected gpipe.pb.StepReport but received "
                                  "gpipe.pb.StepCommand");
}

TEST(ControlFrameTest, ATruncatedFrameIsDataLoss) {
  pb::StepReport report;
  absl::StatusOr<std::string> frame = EncodeFrame(report);
  ASSERT_TRUE(frame.ok());
  for (size_t length : {size_t{0}, size_t{3}, size_t{10}}) {
    const absl::Status status = DecodeFrame(frame->substr(0, length), report, kContext);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << length;
  }
}

TEST(ControlFrameTest, BytesThatDoNotParseAreDataLossNamingTheSender) {
  pb::StepReport report;
  absl::StatusOr<std::string> frame = EncodeFrame(report);
  ASSERT_TRUE(frame.ok());
  // A length-delimited field 12 claiming 100 bytes that are not there.
  const std::string corrupt = *frame + std::string("\x62\x64\x01", 3);
  const absl::Status status = DecodeFrame(corrupt, report, kContext);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(), std::string(kContext) +
                                  ": could not parse the 3 bytes received as gpipe.pb.StepReport");
}

TEST(ControlFrameTest, FramePayloadReturnsTheSerializedMessage) {
  pb::StepDecision decision;
  decision.set_step(8);
  decision.set_apply(true);
  absl::StatusOr<std::string> frame = EncodeFrame(decision);
  ASSERT_TRUE(frame.ok());
  absl::StatusOr<absl::string_view> payload =
      FramePayload(*frame, "gpipe.pb.StepDecision", kContext);
  ASSERT_TRUE(payload.ok()) << payload.status();
  EXPECT_EQ(std::string(*payload), decision.SerializeAsString());
}

}  // namespace
}  // namespace gpipe
