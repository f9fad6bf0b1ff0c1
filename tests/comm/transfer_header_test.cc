// The transfer wire format: tags, headers and their descriptions (pure; no MPI needed).
#include "runtime/comm/transfer_header.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpipe {
namespace {

using ::testing::HasSubstr;

constexpr int kOpenMpiTagUb = 2147483647;

TEST(TransferKeyTest, ToStringNamesKindStepAndMicroBatch) {
  EXPECT_EQ(ToString(TransferKey{.step = 3, .micro_batch = 5}), "activation step=3 mb=5");
  EXPECT_EQ(ToString(TransferKey{
                .step = 0, .micro_batch = 1, .chunk = 2, .kind = TransferKind::kGradient}),
            "gradient step=0 mb=1 chunk=2");
  EXPECT_EQ(ToString(TransferKey{.kind = static_cast<TransferKind>(9)}), "kind(9) step=0 mb=0");
}

TEST(TransferTagTest, TagsAreDistinctAcrossKindSkipMicroBatchChunkAndPart) {
  std::set<int> tags = {GroupTag(MessageClass::kGroupCheck), GroupTag(MessageClass::kGroupCreate)};
  int expected = 2;
  for (TransferKind kind : {TransferKind::kActivation, TransferKind::kGradient}) {
    for (int micro_batch : {0, 1, 2, 255, 256, 1000, (1 << 15) - 1, (1 << 16) - 2}) {
      for (int chunk : {0, 1, 7, 255}) {
        for (TransferPart part : {TransferPart::kHeader, TransferPart::kPayload}) {
          for (int skip_layer : {-1, 4, 5, 4095}) {
            if (skip_layer >= 0 && chunk != 0) continue;  // a skip's layer implies its chunk
            const TransferKey key{.step = 9,
                                  .micro_batch = micro_batch,
                                  .chunk = chunk,
                                  .kind = kind,
                                  .skip_layer = skip_layer};
            absl::StatusOr<int> tag = TransferTag(key, part, kOpenMpiTagUb);
            ASSERT_TRUE(tag.ok()) << tag.status();
            EXPECT_GE(*tag, 0);
            EXPECT_LE(*tag, kOpenMpiTagUb);
            tags.insert(*tag);
            ++expected;
          }
        }
      }
    }
  }
  EXPECT_EQ(static_cast<int>(tags.size()), expected);
}

TEST(TransferTagTest, DecodeTagRecoversPartKindChunkAndMicroBatch) {
  const TransferKey key{.step = 4, .micro_batch = 77, .chunk = 3, .kind = TransferKind::kGradient};
  absl::StatusOr<int> tag = TransferTag(key, TransferPart::kPayload, kOpenMpiTagUb);
  ASSERT_TRUE(tag.ok()) << tag.status();
  const DecodedTag decoded = DecodeTag(*tag);
  EXPECT_EQ(decoded.part, TransferPart::kPayload);
  EXPECT_EQ(decoded.message_class, MessageClass::kGradient);
  EXPECT_EQ(decoded.chunk, 3);
  EXPECT_EQ(decoded.skip_layer, -1);
  EXPECT_EQ(decoded.micro_batch, 77);
}

TEST(TransferTagTest, SkipTransfersAreTaggedByTheirJoinLayer) {
  const TransferKey key{
      .step = 4, .micro_batch = 77, .chunk = 3, .kind = TransferKind::kGradient, .skip_layer = 12};
  absl::StatusOr<int> tag = TransferTag(key, TransferPart::kHeader, kOpenMpiTagUb);
  ASSERT_TRUE(tag.ok()) << tag.status();
  const DecodedTag decoded = DecodeTag(*tag);
  EXPECT_EQ(decoded.part, TransferPart::kHeader);
  EXPECT_EQ(decoded.message_class, MessageClass::kGradient);
  EXPECT_EQ(decoded.skip_layer, 12);
  EXPECT_EQ(decoded.chunk, -1);
  EXPECT_EQ(decoded.micro_batch, 77);
  // Two routes between the same ranks for one micro-batch never share a tag.
  TransferKey other = key;
  other.skip_layer = 13;
  EXPECT_NE(*TransferTag(other, TransferPart::kHeader, kOpenMpiTagUb), *tag);
  other.skip_layer = kMaxSkipLayers;
  EXPECT_THAT(TransferTag(other, TransferPart::kHeader, kOpenMpiTagUb).status().message(),
              ::testing::HasSubstr("with layer < 4096"));
}

TEST(TransferTagTest, MicroBatchBeyondTheTagSpaceIsRejectedSayingTheLimit) {
  // MPI only guarantees tags up to 32767: 16 micro-batches with this layout.
  EXPECT_TRUE(TransferTag(TransferKey{.micro_batch = 15}, TransferPart::kPayload, 32767).ok());
  const absl::StatusOr<int> tag =
      TransferTag(TransferKey{.step = 1, .micro_batch = 16}, TransferPart::kHeader, 32767);
  ASSERT_EQ(tag.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tag.status().message(),
            "activation step=1 mb=16 cannot be encoded in an MPI tag: this MPI allows tags up "
            "to 32767, which holds micro-batches 0..15 and chunks 0..255");
  // Skip connections there: micro-batch 0 only.
  EXPECT_TRUE(
      TransferTag(TransferKey{.micro_batch = 0, .skip_layer = 4094}, TransferPart::kPayload, 32767)
          .ok());
  EXPECT_THAT(
      TransferTag(TransferKey{.micro_batch = 1, .skip_layer = 0}, TransferPart::kPayload, 32767)
          .status()
          .message(),
      ::testing::HasSubstr("a skip connection needs 1 + layer + 4096 * micro-batch <= 4095"));
}

TEST(TransferTagTest, NegativeMicroBatchAndOversizedChunkAreRejected) {
  EXPECT_EQ(TransferTag(TransferKey{.micro_batch = -1}, TransferPart::kHeader, kOpenMpiTagUb)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      TransferTag(TransferKey{.chunk = 256}, TransferPart::kHeader, kOpenMpiTagUb).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TransferTag(TransferKey{.kind = static_cast<TransferKind>(0)}, TransferPart::kHeader,
                        kOpenMpiTagUb)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TransferHeaderTest, RoundTripsKeyDtypeShapeAndSender) {
  const TransferHeader header{.key = {.step = 123456789012,
                                      .micro_batch = 31,
                                      .chunk = 2,
                                      .kind = TransferKind::kGradient,
                                      .skip_layer = 40},
                              .dtype = DType::kI64,
                              .shape = Shape({2, 3, 4, 5, 6, 7, 8, 9}),
                              .sender = 5};
  absl::StatusOr<HeaderWords> words = EncodeHeader(header);
  ASSERT_TRUE(words.ok()) << words.status();
  absl::StatusOr<TransferHeader> decoded = DecodeHeader(*words);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(SameTransfer(*decoded, header));
  EXPECT_EQ(decoded->sender, 5);
  EXPECT_EQ(decoded->key.step, 123456789012);
  EXPECT_EQ(decoded->key.skip_layer, 40);
  EXPECT_EQ(decoded->shape, Shape({2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(TransferHeaderTest, ScalarShapeRoundTrips) {
  absl::StatusOr<HeaderWords> words =
      EncodeHeader(TransferHeader{.key = {}, .shape = Shape(), .sender = 0});
  ASSERT_TRUE(words.ok());
  absl::StatusOr<TransferHeader> decoded = DecodeHeader(*words);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->shape.rank(), 0);
}

TEST(TransferHeaderTest, MoreThanEightDimensionsAreRejected) {
  const absl::StatusOr<HeaderWords> words =
      EncodeHeader(TransferHeader{.key = {}, .shape = Shape({1, 1, 1, 1, 1, 1, 1, 1, 1})});
  ASSERT_EQ(words.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(words.status().message()), HasSubstr("at most 8 dimensions"));
}

TEST(TransferHeaderTest, BytesThatAreNotAHeaderAreDataLoss) {
  HeaderWords garbage{};
  garbage.fill(7);
  EXPECT_EQ(DecodeHeader(garbage).status().code(), absl::StatusCode::kDataLoss);
  absl::StatusOr<HeaderWords> words = EncodeHeader(TransferHeader{.key = {}, .shape = Shape({4})});
  ASSERT_TRUE(words.ok());
  (*words)[7] = 12;  // rank beyond the limit
  EXPECT_EQ(DecodeHeader(*words).status().code(), absl::StatusCode::kDataLoss);
}

TEST(TransferHeaderTest, SameTransferComparesEveryFieldButTheSender) {
  const TransferHeader base{.key = {.step = 3, .micro_batch = 5},
                            .dtype = DType::kF32,
                            .shape = Shape({8, 256}),
                            .sender = 1};
  TransferHeader other = base;
  other.sender = 4;
  EXPECT_TRUE(SameTransfer(base, other));
  for (int field = 0; field < 6; ++field) {
    other = base;
    switch (field) {
      case 0:
        other.key.step = 4;
        break;
      case 1:
        other.key.micro_batch = 6;
        break;
      case 2:
        other.key.chunk = 1;
        break;
      case 3:
        other.key.kind = TransferKind::kGradient;
        break;
      case 4:
        other.dtype = DType::kI64;
        break;
      case 5:
        other.shape = Shape({8, 255});
        break;
    }
    EXPECT_FALSE(SameTransfer(base, other)) << "field " << field;
  }
}

TEST(TransferHeaderTest, DescribeShowsKeyDtypeAndShapeAndCopesWithGarbage) {
  EXPECT_EQ(Describe(TransferKey{.step = 3, .micro_batch = 5}, DType::kF32, Shape({8, 256})),
            "activation step=3 mb=5 f32[8, 256]");
  EXPECT_EQ(Describe(TransferKey{.step = 3, .micro_batch = 5}, static_cast<DType>(42), Shape({2})),
            "activation step=3 mb=5 dtype(42)[2]");
}

}  // namespace
}  // namespace gpipe
