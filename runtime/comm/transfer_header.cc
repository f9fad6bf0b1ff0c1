#include "runtime/comm/transfer_header.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {

constexpr int kPartBits = 1;
constexpr int kClassBits = 2;
constexpr int kSkipBits = 1;
constexpr int kChunkBits = 8;
constexpr int kChunkShift = kPartBits + kClassBits + kSkipBits;
constexpr int kMicroBatchShift = kChunkShift + kChunkBits;
// A skip connection's transfers: the join layer in place of the chunk, and wider.
constexpr int kSkipLayerBits = 12;
constexpr int kSkipMicroBatchShift = kChunkShift + kSkipLayerBits;
static_assert(kMaxChunks == 1 << kChunkBits);
static_assert(kMaxSkipLayers == 1 << kSkipLayerBits);

// "gpipeTH" + version 2 (version 2 added the skip layer word).
constexpr int64_t kHeaderMagic = 0x6770697065544802;

int ComposeTag(TransferPart part, MessageClass message_class, int chunk, int64_t micro_batch) {
  return static_cast<int>((micro_batch << kMicroBatchShift) | (int64_t{chunk} << kChunkShift) |
                          (static_cast<int64_t>(message_class) << 1) | static_cast<int64_t>(part));
}

int ComposeSkipTag(TransferPart part, MessageClass message_class, int skip_layer,
                   int64_t micro_batch) {
  return static_cast<int>((micro_batch << kSkipMicroBatchShift) |
                          (int64_t{skip_layer} << kChunkShift) |
                          (int64_t{1} << (kPartBits + kClassBits)) |
                          (static_cast<int64_t>(message_class) << 1) | static_cast<int64_t>(part));
}

std::string DTypeText(DType dtype) {
  if (dtype == DType::kF32 || dtype == DType::kI64) return DTypeName(dtype);
  return absl::StrCat("dtype(", static_cast<int32_t>(dtype), ")");
}

}  // namespace

absl::StatusOr<int> TransferTag(const TransferKey& key, TransferPart part, int tag_ub) {
  if (key.kind != TransferKind::kActivation && key.kind != TransferKind::kGradient) {
    return absl::InvalidArgumentError(
        absl::StrCat("transfer kind ", static_cast<int32_t>(key.kind), " is not a TransferKind"));
  }
  const MessageClass message_class =
      key.kind == TransferKind::kActivation ? MessageClass::kActivation : MessageClass::kGradient;
  if (key.skip_layer >= 0) {
    // The chunk is implied by the route (one join layer, one receiving chunk).
    const int64_t max_micro_batches = (int64_t{tag_ub} >> kSkipMicroBatchShift) + 1;
    if (key.micro_batch < 0 || key.skip_layer >= kMaxSkipLayers ||
        key.micro_batch >= max_micro_batches) {
      return absl::InvalidArgumentError(absl::StrCat(
          ToString(key), " cannot be encoded in an MPI tag: this MPI allows tags up to ", tag_ub,
          ", which holds the skip connections of micro-batches 0..", max_micro_batches - 1,
          " into layers 0..", kMaxSkipLayers - 1));
    }
    return ComposeSkipTag(part, message_class, key.skip_layer, key.micro_batch);
  }
  const int64_t max_micro_batches = (int64_t{tag_ub} >> kMicroBatchShift) + 1;
  if (key.micro_batch < 0 || key.chunk < 0 || key.chunk >= kMaxChunks ||
      key.micro_batch >= max_micro_batches) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToString(key), " cannot be encoded in an MPI tag: this MPI allows ",
                     "tags up to ", tag_ub, ", which holds micro-batches 0..",
                     max_micro_batches - 1, " and chunks 0..", kMaxChunks - 1));
  }
  return ComposeTag(part, message_class, key.chunk, key.micro_batch);
}

int GroupTag(MessageClass message_class) {
  return ComposeTag(TransferPart::kHeader, message_class, 0, 0);
}

DecodedTag DecodeTag(int tag) {
  const bool skip = ((tag >> (kPartBits + kClassBits)) & 1) != 0;
  return DecodedTag{
      .part = static_cast<TransferPart>(tag & 1),
      .message_class = static_cast<MessageClass>((tag >> 1) & 3),
      .chunk = skip ? -1 : (tag >> kChunkShift) & (kMaxChunks - 1),
      .skip_layer = skip ? (tag >> kChunkShift) & (kMaxSkipLayers - 1) : -1,
      .micro_batch = tag >> (skip ? kSkipMicroBatchShift : kMicroBatchShift),
  };
}

absl::StatusOr<HeaderWords> EncodeHeader(const TransferHeader& header) {
  if (header.shape.rank() > kMaxTransferRank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot transfer a tensor of rank ", header.shape.rank(), " (", Describe(header),
        "): transfers carry at most ", kMaxTransferRank, " dimensions"));
  }
  HeaderWords words{};
  words[0] = kHeaderMagic;
  words[1] = header.key.step;
  words[2] = header.key.micro_batch;
  words[3] = header.key.chunk;
  words[4] = static_cast<int64_t>(header.key.kind);
  words[5] = static_cast<int64_t>(header.dtype);
  words[6] = header.sender;
  words[7] = header.shape.rank();
  words[8] = header.key.skip_layer;
  for (int i = 0; i < header.shape.rank(); ++i) words[9 + i] = header.shape.dim(i);
  return words;
}

absl::StatusOr<TransferHeader> DecodeHeader(const HeaderWords& words) {
  if (words[0] != kHeaderMagic) {
    return absl::DataLossError(
        "received bytes that are not a gpipe transfer header (bad magic or another gpipe "
        "version on the sending rank)");
  }
  const int64_t rank = words[7];
  if (rank < 0 || rank > kMaxTransferRank) {
    return absl::DataLossError(absl::StrCat("transfer header claims a tensor of rank ", rank));
  }
  TransferHeader header;
  header.key.step = words[1];
  header.key.micro_batch = static_cast<int32_t>(words[2]);
  header.key.chunk = static_cast<int32_t>(words[3]);
  header.key.kind = static_cast<TransferKind>(words[4]);
  header.dtype = static_cast<DType>(words[5]);
  header.sender = static_cast<int32_t>(words[6]);
  header.key.skip_layer = static_cast<int32_t>(words[8]);
  header.shape = Shape(std::vector<int64_t>(words.begin() + 9, words.begin() + 9 + rank));
  return header;
}

std::string Describe(const TransferKey& key, DType dtype, const Shape& shape) {
  return absl::StrCat(ToString(key), " ", DTypeText(dtype), shape.ToString());
}

std::string Describe(const TransferHeader& header) {
  return Describe(header.key, header.dtype, header.shape);
}

bool SameTransfer(const TransferHeader& a, const TransferHeader& b) {
  return a.key.step == b.key.step && a.key.micro_batch == b.key.micro_batch &&
         a.key.chunk == b.key.chunk && a.key.kind == b.key.kind &&
         a.key.skip_layer == b.key.skip_layer && a.dtype == b.dtype && a.shape == b.shape;
}

}  // namespace gpipe
