// The wire form of a control message: its protobuf type name, then its serialized bytes. A
// receiver that expects another type fails with both names instead of parsing garbage into the
// wrong message (proto2 would often accept it). Pure functions; thread-safe.
#ifndef GPIPE_RUNTIME_COMM_CONTROL_FRAME_H_
#define GPIPE_RUNTIME_COMM_CONTROL_FRAME_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"

namespace gpipe {

// INTERNAL when the message cannot be serialized (proto2 required fields missing).
absl::StatusOr<std::string> EncodeFrame(const google::protobuf::MessageLite& message);

// The serialized message inside `frame`, which must carry `expected_type`. Errors start with
// `context` (who received what from whom): DATA_LOSS for a malformed frame, INVALID_ARGUMENT
// for another type ("expected gpipe.pb.StepReport but received gpipe.pb.StepCommand").
absl::StatusOr<absl::string_view> FramePayload(absl::string_view frame,
                                               const std::string& expected_type,
                                               absl::string_view context);

// FramePayload, then parses it into `message`; DATA_LOSS when the bytes do not parse.
absl::Status DecodeFrame(absl::string_view frame, google::protobuf::MessageLite& message,
                         absl::string_view context);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_CONTROL_FRAME_H_
