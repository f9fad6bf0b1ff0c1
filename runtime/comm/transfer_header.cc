#include "runtime/comm/transfer_header.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {

constexpr int kPartBits = 1;
constexpr int kClassBits = 2;
constexpr int kChunkBits = 8;
constexpr int kClassShift = kPartBits;
constexpr int kChunkShift = kPartBits + kClassBits;
constexpr int kMicroBatchShift = kChunkShift + kChunkBits;
static_assert(kMaxChunks == 1 << kChunkBits);

// "gpipeTH" + version 2 (version 2 added the skip layer word).
constexpr int64_t kHeaderMagic = 0x6770697065544802;

int ComposeTag(TransferPart part, MessageClass message_class, int chunk, int64_t micro_batch) {
  return static_cast<int>((micro_batch << kMicroBatchShift) | (int64_t{chunk} << kChunkShift) |
                          (static_cast<int64_t>(message_class) << kClassShift) |
                          static_cast<int64_t>(part));
}

// A skip connection's transfer: the bookkeeping classes (whose own tags leave every bit above the
// class clear) with 1 + layer + micro-batch * kMaxSkipLayers above the class: the join layer
// implies the chunk.
int64_t SkipIndex(int skip_layer, int64_t micro_batch) {
  return 1 + skip_layer + micro_batch * kMaxSkipLayers;
}
MessageClass SkipClass(TransferKind kind) {
  return kind == TransferKind::kActivation ? MessageClass::kGroupCheck : MessageClass::kGroupCreate;
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
  if (key.skip_layer >= 0) {
    const int64_t room = int64_t{tag_ub} >> kChunkShift;
    if (key.micro_batch < 0 || key.skip_layer >= kMaxSkipLayers ||
        SkipIndex(key.skip_layer, key.micro_batch) > room) {
      return absl::InvalidArgumentError(absl::StrCat(
          ToString(key), " cannot be encoded in an MPI tag: this MPI allows tags up to ", tag_ub,
          ", and a skip connection needs 1 + layer + ", kMaxSkipLayers, " * micro-batch <= ", room,
          " with layer < ", kMaxSkipLayers));
    }
    return static_cast<int>((SkipIndex(key.skip_layer, key.micro_batch) << kChunkShift) |
                            (static_cast<int64_t>(SkipClass(key.kind)) << kClassShift) |
                            static_cast<int64_t>(part));
  }
  const MessageClass message_class =
      key.kind == TransferKind::kActivation ? MessageClass::kActivation : MessageClass::kGradient;
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
  const auto message_class = static_cast<MessageClass>((tag >> kClassShift) & 3);
  const int64_t above = tag >> kChunkShift;
  const bool bookkeeping =
      message_class == MessageClass::kGroupCheck || message_class == MessageClass::kGroupCreate;
  if (bookkeeping && above > 0) {  // a skip connection's transfer
    return DecodedTag{
        .part = static_cast<TransferPart>(tag & 1),
        .message_class = message_class == MessageClass::kGroupCheck ? MessageClass::kActivation
                                                                    : MessageClass::kGradient,
        .chunk = -1,
        .skip_layer = static_cast<int>((above - 1) % kMaxSkipLayers),
        .micro_batch = static_cast<int>((above - 1) / kMaxSkipLayers),
    };
  }
  return DecodedTag{
      .part = static_cast<TransferPart>(tag & 1),
      .message_class = message_class,
      .chunk = (tag >> kChunkShift) & (kMaxChunks - 1),
      .skip_layer = -1,
      .micro_batch = tag >> kMicroBatchShift,
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
