#include "runtime/data/token_file.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// Little-endian ids whatever the host's byte order.
template <int kWidth>
int64_t IdAt(const std::byte* p) {
  uint32_t id = 0;
  for (int b = 0; b < kWidth; ++b) id |= static_cast<uint32_t>(p[b]) << (8 * b);
  return id;
}

template <int kWidth>
void Decode(const std::byte* p, int64_t count, int64_t* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = IdAt<kWidth>(p + i * kWidth);
}

// The first position in [0, count) whose id is >= bound, or count.
template <int kWidth>
int64_t FirstAtOrAbove(const std::byte* p, int64_t count, int64_t bound) {
  // The largest id of the piece first (a loop the compiler vectorizes), the position only when
  // one is out of range.
  int64_t largest = 0;
  for (int64_t i = 0; i < count; ++i) largest = std::max(largest, IdAt<kWidth>(p + i * kWidth));
  if (largest < bound) return count;
  for (int64_t i = 0; i < count; ++i) {
    if (IdAt<kWidth>(p + i * kWidth) >= bound) return i;
  }
  return count;
}

}  // namespace

int TokenFile::Width(pb::TokenDType dtype) { return dtype == pb::UINT32 ? 4 : 2; }

absl::StatusOr<TokenFile> TokenFile::Open(const std::string& path, pb::TokenDType dtype) {
  ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  const int width = Width(dtype);
  const size_t bytes = file.bytes().size();
  if (bytes % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " has ", bytes, " bytes, not a whole number of ", pb::TokenDType_Name(dtype),
        " ids (", width, " bytes each); is data.tokens.dtype right, or the file cut short?"));
  }
  return TokenFile(std::move(file), width);
}

void TokenFile::Read(int64_t first, int64_t count, int64_t* out) const {
  const std::byte* p = file_.bytes().data() + first * width_;
  if (width_ == 2) {
    Decode<2>(p, count, out);
  } else {
    Decode<4>(p, count, out);
  }
}

absl::Status TokenFile::CheckIdsBelow(int64_t bound, const std::string& why) const {
  constexpr int64_t kPieceIds = int64_t{4} << 20;
  for (int64_t first = 0; first < size_; first += kPieceIds) {
    const int64_t count = std::min(kPieceIds, size_ - first);
    const std::byte* p = file_.bytes().data() + first * width_;
    const int64_t at =
        width_ == 2 ? FirstAtOrAbove<2>(p, count, bound) : FirstAtOrAbove<4>(p, count, bound);
    file_.Release(static_cast<size_t>(first * width_), static_cast<size_t>(count * width_));
    if (at < count) {
      const int64_t offset = first + at;
      int64_t id = 0;
      Read(offset, 1, &id);
      return absl::InvalidArgumentError(absl::StrCat(
          path(), ": the token at offset ", offset, " (byte ", offset * width_, ") is ", id,
          ", outside the model's vocabulary [0, ", bound, ") (", why,
          "); was the file tokenized for another vocabulary, or is data.tokens.dtype wrong?"));
    }
  }
  return absl::OkStatus();
}

}  // namespace gpipe
