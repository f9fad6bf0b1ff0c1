// The wire format of a boundary transfer: the MPI tag it travels under and the fixed-size header
// sent ahead of its payload. Tags keep transfers of different (kind, micro-batch, chunk) apart
// so receives may be posted in any order; the header repeats the whole key (step included,
// which the tag leaves out) with dtype, shape and sender so the receiver can check it.
// Pure functions and value types; thread-safe.
#ifndef GPIPE_RUNTIME_COMM_TRANSFER_HEADER_H_
#define GPIPE_RUNTIME_COMM_TRANSFER_HEADER_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/comm/data_channel.h"
#include "runtime/core/dtype.h"
#include "runtime/core/shape.h"

namespace gpipe {

// Tag layout, low bits first: 1 bit part (header/payload), 2 bits message class, 8 bits chunk,
// the rest micro-batch. Open MPI's tag limit (2^31 - 1) leaves room for 2^20 micro-batches. A skip
// connection's transfer takes the class of the bookkeeping messages (kGroupCheck for outputs,
// kGroupCreate for gradients), whose own tags have every higher bit clear, and above it
// 1 + join layer + micro-batch * kMaxSkipLayers: room for 65,535 micro-batches under Open MPI's
// limit. Every transfer between two ranks in one step has a tag of its own, so a payload
// receive, posted once its header has arrived, can never take another transfer's payload.
enum class TransferPart : int { kHeader = 0, kPayload = 1 };
enum class MessageClass : int { kActivation = 0, kGradient = 1, kGroupCheck = 2, kGroupCreate = 3 };
inline constexpr int kMaxChunks = 256;
inline constexpr int kMaxSkipLayers = 4096;

// The tag of one part of the transfer `key`. INVALID_ARGUMENT when the key is negative or does
// not fit under `tag_ub` (the communicator's MPI_TAG_UB), saying which limit it broke.
absl::StatusOr<int> TransferTag(const TransferKey& key, TransferPart part, int tag_ub);
// Tags of the all-reduce bookkeeping messages (no key; always small).
int GroupTag(MessageClass message_class);

struct DecodedTag {
  TransferPart part;
  MessageClass message_class;  // a skip connection's transfer: kActivation or kGradient
  int chunk;                   // -1 for a skip connection's transfer
  int skip_layer;              // -1 for every other message
  int micro_batch;
};
DecodedTag DecodeTag(int tag);

// What a transfer claims to be. dtype and kind hold whatever arrived (possibly not a valid
// enumerator when the bytes are garbage); Describe copes with that.
struct TransferHeader {
  TransferKey key;
  DType dtype = DType::kF32;
  Shape shape;
  int32_t sender = -1;
};

inline constexpr int kMaxTransferRank = 8;
inline constexpr int kHeaderWords = 9 + kMaxTransferRank;
using HeaderWords = std::array<int64_t, kHeaderWords>;

// INVALID_ARGUMENT for tensors of more than kMaxTransferRank dimensions.
absl::StatusOr<HeaderWords> EncodeHeader(const TransferHeader& header);
// DATA_LOSS when the words are not a gpipe transfer header of this version.
absl::StatusOr<TransferHeader> DecodeHeader(const HeaderWords& words);

// "activation step=3 mb=5 f32[8, 256]".
std::string Describe(const TransferKey& key, DType dtype, const Shape& shape);
std::string Describe(const TransferHeader& header);
// Whether key, dtype and shape agree (the sender is checked separately).
bool SameTransfer(const TransferHeader& a, const TransferHeader& b);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_TRANSFER_HEADER_H_
