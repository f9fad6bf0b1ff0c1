// BadId: which id an op found outside its range (EmbeddingOps::Gather, LossOps::
// SoftmaxCrossEntropy), attached to the op's INVALID_ARGUMENT status as a payload. The ids live
// in device memory, so the layer cannot look for the bad one itself; it reads the flat index
// and the id from the status and words its own message (which sample, which position). Where
// the ids are still host data (the data path, before the upload) FirstIdOutside finds it.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_BAD_ID_H_
#define GPIPE_RUNTIME_DEVICE_OPS_BAD_ID_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace gpipe {

struct BadId {
  int64_t index = 0;  // flat position in the ids tensor
  int64_t id = 0;     // the value found there
};

inline constexpr absl::string_view kBadIdPayloadUrl = "gpipe/bad_id";

// INVALID_ARGUMENT with `message`, carrying `bad` as a payload.
inline absl::Status BadIdError(absl::string_view message, BadId bad) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kBadIdPayloadUrl, absl::Cord(absl::StrCat(bad.index, " ", bad.id)));
  return status;
}

// The first of `ids` outside [0, limit), with its flat index; nullopt when every id is in range.
// For ids the host holds: the CPU backend's kernels and the data path's checks before an upload.
inline std::optional<BadId> FirstIdOutside(std::span<const int64_t> ids, int64_t limit) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= limit) {
      return BadId{.index = static_cast<int64_t>(i), .id = ids[i]};
    }
  }
  return std::nullopt;
}

// The BadId a status carries, if any.
inline std::optional<BadId> BadIdOf(const absl::Status& status) {
  const absl::optional<absl::Cord> payload = status.GetPayload(kBadIdPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  const std::string text(*payload);
  const std::pair<absl::string_view, absl::string_view> words =
      absl::StrSplit(text, absl::MaxSplits(' ', 1));
  BadId bad;
  if (!absl::SimpleAtoi(words.first, &bad.index) || !absl::SimpleAtoi(words.second, &bad.id)) {
    return std::nullopt;
  }
  return bad;
}

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_BAD_ID_H_
