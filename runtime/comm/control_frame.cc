#include "runtime/comm/control_frame.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

constexpr size_t kLengthBytes = 4;
// Type names are short ("gpipe.pb.StepReport"); anything longer is corruption.
constexpr uint32_t kMaxTypeNameBytes = 1024;

}  // namespace

absl::StatusOr<std::string> EncodeFrame(const google::protobuf::MessageLite& message) {
  const std::string type = message.GetTypeName();
  std::string frame;
  const uint32_t length = static_cast<uint32_t>(type.size());
  for (size_t i = 0; i < kLengthBytes; ++i) frame.push_back(static_cast<char>(length >> (8 * i)));
  frame += type;
  if (!message.AppendToString(&frame)) {
    return absl::InternalError(
        absl::StrCat("cannot serialize ", type, ": ", message.InitializationErrorString()));
  }
  return frame;
}

absl::StatusOr<absl::string_view> FramePayload(absl::string_view frame,
                                               const std::string& expected_type,
                                               absl::string_view context) {
  uint32_t length = 0;
  if (frame.size() >= kLengthBytes) {
    for (size_t i = 0; i < kLengthBytes; ++i) {
      length |= uint32_t{static_cast<unsigned char>(frame[i])} << (8 * i);
    }
  }
  if (frame.size() < kLengthBytes || length > kMaxTypeNameBytes ||
      frame.size() - kLengthBytes < length) {
    return absl::DataLossError(absl::StrCat(context, ": received a malformed control message (",
                                            frame.size(), " bytes) where ", expected_type,
                                            " was expected"));
  }
  const absl::string_view type = frame.substr(kLengthBytes, length);
  if (type != expected_type) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": expected ", expected_type, " but received ", type));
  }
  return frame.substr(kLengthBytes + length);
}

absl::Status DecodeFrame(absl::string_view frame, google::protobuf::MessageLite& message,
                         absl::string_view context) {
  ASSIGN_OR_RETURN(const absl::string_view payload,
                   FramePayload(frame, message.GetTypeName(), context));
  if (!message.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::DataLossError(absl::StrCat(context, ": could not parse the ", payload.size(),
                                            " bytes received as ", message.GetTypeName()));
  }
  return absl::OkStatus();
}

}  // namespace gpipe
