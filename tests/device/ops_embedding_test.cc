// Conformance of the embedding ops family on every backend (see backends_under_test.h): row
// gather with its id check, the scatter-add gradient and the broadcast add of a table slice.
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "runtime/device/ops/bad_id.h"
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A gather copies values: bit for bit.
constexpr double kExact = 0.0;
// One float addition of two floats is the double sum rounded once: half an ulp, 2^-24
// relative, plus a floor for sums that cancel to near zero.
constexpr double kOneRoundingRel = 6e-8;
constexpr double kOneRoundingAbs = 1e-12;
// ScatterAdd adds up to 4 float terms per element in float: 4 roundings.
constexpr double kFewRoundingsRel = 4 * 6e-8;
constexpr double kFewRoundingsAbs = 1e-7;

class EmbeddingOpsTest : public OpsConformanceTest {};

TEST_P(EmbeddingOpsTest, GatherCopiesTheRowsOfTheIds) {
  const std::vector<float> table = TestValues(1, 5 * 3);
  const std::vector<int64_t> ids = {4, 0, 4, 2, 1, 3};
  Tensor out = Uninitialized(Shape{2, 3, 3});
  ASSERT_TRUE(
      ops().embedding.Gather(Upload(table, Shape{5, 3}), UploadIds(ids, Shape{2, 3}), out).ok());
  std::vector<double> expected;
  for (int64_t id : ids) {
    for (int d = 0; d < 3; ++d) expected.push_back(table[id * 3 + d]);
  }
  ExpectNear(Download(out), expected, kExact, kExact, "gathered rows");
}

TEST_P(EmbeddingOpsTest, GatherOfNoIdsIsFine) {
  Tensor out = Uninitialized(Shape{0, 3});
  EXPECT_TRUE(
      ops()
          .embedding.Gather(Upload(TestValues(1, 6), Shape{2, 3}), UploadIds({}, Shape{0}), out)
          .ok());
}

TEST_P(EmbeddingOpsTest, GatherReportsTheFirstIdOutOfRange) {
  const Tensor table = Upload(TestValues(1, 4 * 2), Shape{4, 2});
  for (const auto& [ids, index, id] :
       std::vector<std::tuple<std::vector<int64_t>, int64_t, int64_t>>{
           {{0, 1, 7, 9}, 2, 7}, {{-1, 1, 2, 3}, 0, -1}, {{0, 1, 2, 4}, 3, 4}}) {
    Tensor out = Uninitialized(Shape{4, 2});
    const absl::Status status =
        ReportedBy(ops().embedding.Gather(table, UploadIds(ids, Shape{4}), out));
    ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()),
                StartsWith("index " + std::to_string(index) + " has id " + std::to_string(id)));
    const std::optional<BadId> bad = BadIdOf(status);
    ASSERT_TRUE(bad.has_value());
    EXPECT_EQ(bad->index, index);
    EXPECT_EQ(bad->id, id);
  }
}

TEST_P(EmbeddingOpsTest, ScatterAddReportsTheFirstIdOutOfRange) {
  Tensor dtable = Zeros(Shape{4, 2});
  const absl::Status status = ReportedBy(ops().embedding.ScatterAdd(
      UploadIds({3, 0, 2, 1, -5, 9}, Shape{2, 3}), Upload(TestValues(2, 12), Shape{6, 2}), dtable));
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), StartsWith("index 4 has id -5, outside [0, 4)"));
  const std::optional<BadId> bad = BadIdOf(status);
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->index, 4);
  EXPECT_EQ(bad->id, -5);
}

// Of several calls with bad ids, the first call's first bad id is the one reported (a device that
// reports at its next wait keeps the earliest), and the device is usable afterwards.
TEST_P(EmbeddingOpsTest, TheEarliestBadCallIsReportedAndTheNextCallsAreClean) {
  const Tensor table = Upload(TestValues(1, 4 * 2), Shape{4, 2});
  Tensor out = Uninitialized(Shape{4, 2});
  absl::Status status = ops().embedding.Gather(table, UploadIds({0, 1, 2, 3}, Shape{4}), out);
  if (status.ok()) status = ops().embedding.Gather(table, UploadIds({0, 1, 6, 3}, Shape{4}), out);
  if (status.ok()) status = ops().embedding.Gather(table, UploadIds({8, 1, 2, 3}, Shape{4}), out);
  status = ReportedBy(status);
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), StartsWith("index 2 has id 6"));
  // Reported once: good calls after it succeed and compute the right rows.
  ASSERT_TRUE(
      ReportedBy(ops().embedding.Gather(table, UploadIds({3, 2, 1, 0}, Shape{4}), out)).ok());
  const std::vector<float> values = TestValues(1, 4 * 2);
  std::vector<double> expected;
  for (int64_t id : {3, 2, 1, 0}) {
    for (int d = 0; d < 2; ++d) expected.push_back(values[id * 2 + d]);
  }
  ExpectNear(Download(out), expected, kExact, kExact, "out");
}

// A device that reports a bad id at its next wait names the work the call was issued under
// (Device::LabelWork), not the work that waited; one that fails the call itself has no need to.
TEST_P(EmbeddingOpsTest, ALaterReportNamesTheWorkThatIssuedTheCall) {
  const Tensor table = Upload(TestValues(1, 4 * 2), Shape{4, 2});
  Tensor out = Uninitialized(Shape{4, 2});
  device().LabelWork("work A");
  ASSERT_TRUE(ops().embedding.Gather(table, UploadIds({0, 1, 2, 3}, Shape{4}), out).ok());
  device().LabelWork("work B");
  const absl::Status call = ops().embedding.Gather(table, UploadIds({0, 9, 2, 3}, Shape{4}), out);
  if (!call.ok()) {
    EXPECT_THAT(std::string(call.message()), StartsWith("index 1 has id 9"));
    GTEST_SKIP() << device().name() << " reports a bad id from the call itself";
  }
  device().LabelWork("work C");
  ASSERT_TRUE(ops().embedding.Gather(table, UploadIds({3, 2, 1, 0}, Shape{4}), out).ok());
  const absl::Status status = device().Synchronize();
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), StartsWith("index 1 has id 9"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("issued in work B,"));
  // The labels are the report's: the next bad call names its own.
  device().LabelWork("work D");
  const absl::Status next =
      ReportedBy(ops().embedding.Gather(table, UploadIds({0, 1, 2, -1}, Shape{4}), out));
  EXPECT_THAT(std::string(next.message()), HasSubstr("issued in work D,"));
}

TEST_P(EmbeddingOpsTest, GatherRejectsMismatchedShapes) {
  const Tensor table = Upload(TestValues(1, 4 * 2), Shape{4, 2});
  Tensor short_out = Uninitialized(Shape{3, 2});
  EXPECT_EQ(ops().embedding.Gather(table, UploadIds({0, 1, 2, 3}, Shape{4}), short_out).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor out = Uninitialized(Shape{4, 2});
  EXPECT_EQ(ops().embedding.Gather(table, Zeros(Shape{4}, DType::kF32), out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ops()
                .embedding
                .Gather(Upload(TestValues(1, 8), Shape{8}), UploadIds({0, 1, 2, 3}, Shape{4}), out)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(EmbeddingOpsTest, ScatterAddAccumulatesRowsSharingAnId) {
  const std::vector<float> start = TestValues(2, 4 * 3);
  const std::vector<float> dout = TestValues(3, 6 * 3);
  const std::vector<int64_t> ids = {1, 3, 1, 1, 0, 3};
  Tensor dtable = Upload(start, Shape{4, 3});
  ASSERT_TRUE(
      ops()
          .embedding.ScatterAdd(UploadIds(ids, Shape{2, 3}), Upload(dout, Shape{2, 3, 3}), dtable)
          .ok());
  std::vector<double> expected(start.begin(), start.end());
  for (size_t r = 0; r < ids.size(); ++r) {
    for (int d = 0; d < 3; ++d) expected[ids[r] * 3 + d] += dout[r * 3 + d];
  }
  ExpectNear(Download(dtable), expected, kFewRoundingsRel, kFewRoundingsAbs, "dtable");
}

// The table after ScatterAdd done as the contract words it: dtable[ids[r], :] += dout[r, :] in
// float, in order of r. Every backend adds rows sharing an id in this order, so the result is
// exact (the CUDA backend groups the positions by id with a stable sort and adds each group in
// position order).
std::vector<double> SerialScatterAdd(std::vector<float> table, const std::vector<int64_t>& ids,
                                     const std::vector<float>& dout, int64_t dim) {
  for (size_t r = 0; r < ids.size(); ++r) {
    for (int64_t d = 0; d < dim; ++d) table[ids[r] * dim + d] += dout[r * dim + d];
  }
  return std::vector<double>(table.begin(), table.end());
}

// A language model's vocabulary (GPT-2's, padded: 50304 rows), a micro-batch of 4096 positions
// whose ids repeat (a few hot ids, the first and last rows, a long tail), and a width that is
// not a multiple of a column tile.
TEST_P(EmbeddingOpsTest, ScatterAddOfRepeatedIdsAddsInPositionOrderBitForBit) {
  constexpr int64_t kRows = 50304;
  constexpr int64_t kDim = 72;
  constexpr int64_t kPositions = 4096;
  std::vector<int64_t> ids(kPositions);
  for (int64_t r = 0; r < kPositions; ++r) {
    ids[r] = r % 3 == 0   ? 7
             : r % 5 == 0 ? (r % 2 == 0 ? 0 : kRows - 1)
                          : (r * 7919) % 613 * 79 % kRows;
  }
  const std::vector<float> start = TestValues(6, kRows * kDim);
  const std::vector<float> dout = TestValues(7, kPositions * kDim);
  Tensor dtable = Upload(start, Shape{kRows, kDim});
  ASSERT_TRUE(ops()
                  .embedding
                  .ScatterAdd(UploadIds(ids, Shape{8, kPositions / 8}),
                              Upload(dout, Shape{8, kPositions / 8, kDim}), dtable)
                  .ok());
  ExpectNear(Download(dtable), SerialScatterAdd(start, ids, dout, kDim), kExact, kExact, "dtable");
}

TEST_P(EmbeddingOpsTest, ScatterAddOfOneIdEverywhereAddsInPositionOrderBitForBit) {
  constexpr int64_t kRows = 300;
  constexpr int64_t kDim = 130;
  constexpr int64_t kPositions = 1000;
  const std::vector<int64_t> ids(kPositions, kRows - 1);
  const std::vector<float> start = TestValues(8, kRows * kDim);
  const std::vector<float> dout = TestValues(9, kPositions * kDim);
  Tensor dtable = Upload(start, Shape{kRows, kDim});
  ASSERT_TRUE(ops()
                  .embedding
                  .ScatterAdd(UploadIds(ids, Shape{kPositions}),
                              Upload(dout, Shape{kPositions, kDim}), dtable)
                  .ok());
  ExpectNear(Download(dtable), SerialScatterAdd(start, ids, dout, kDim), kExact, kExact, "dtable");
}

// More positions than one grid dimension's blocks (65535), in a narrow table: two runs give the
// same bits, and the serial order's.
TEST_P(EmbeddingOpsTest, ScatterAddGivesTheSameBitsEveryRun) {
  constexpr int64_t kRows = 1000;
  constexpr int64_t kDim = 3;
  constexpr int64_t kPositions = 70000;
  std::vector<int64_t> ids(kPositions);
  for (int64_t r = 0; r < kPositions; ++r) ids[r] = (r * r + 3 * r) % kRows;
  const std::vector<float> start = TestValues(10, kRows * kDim);
  const std::vector<float> dout = TestValues(11, kPositions * kDim);
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    Tensor dtable = Upload(start, Shape{kRows, kDim});
    ASSERT_TRUE(ops()
                    .embedding
                    .ScatterAdd(UploadIds(ids, Shape{kPositions}),
                                Upload(dout, Shape{kPositions, kDim}), dtable)
                    .ok());
    runs.push_back(Download(dtable));
  }
  EXPECT_EQ(runs[0], runs[1]);
  ExpectNear(runs[0], SerialScatterAdd(start, ids, dout, kDim), kExact, kExact, "dtable");
}

TEST_P(EmbeddingOpsTest, ScatterAddOfNoRowsLeavesTheTable) {
  const std::vector<float> start = TestValues(2, 6);
  Tensor dtable = Upload(start, Shape{3, 2});
  ASSERT_TRUE(
      ops().embedding.ScatterAdd(UploadIds({}, Shape{0}), Uninitialized(Shape{0, 2}), dtable).ok());
  ExpectNear(Download(dtable), std::vector<double>(start.begin(), start.end()), kExact, kExact,
             "dtable");
}

TEST_P(EmbeddingOpsTest, ScatterAddRejectsIdsOutOfRangeAndBadShapes) {
  Tensor dtable = Zeros(Shape{3, 2});
  EXPECT_EQ(
      ops().embedding.ScatterAdd(UploadIds({0, 3}, Shape{2}), Zeros(Shape{2, 2}), dtable).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ops().embedding.ScatterAdd(UploadIds({0, 1}, Shape{2}), Zeros(Shape{3, 2}), dtable).code(),
      absl::StatusCode::kInvalidArgument);
  ExpectNear(Download(dtable), std::vector<double>(6, 0.0), kExact, kExact, "untouched dtable");
}

TEST_P(EmbeddingOpsTest, AddRowBroadcastAddsTheFirstNElementsOfTheRowToEveryRow) {
  const std::vector<float> in = TestValues(4, 3 * 4);
  const std::vector<float> table = TestValues(5, 6);  // only the first 4 are used
  Tensor out = Uninitialized(Shape{3, 2, 2});
  ASSERT_TRUE(
      ops()
          .embedding.AddRowBroadcast(Upload(in, Shape{3, 2, 2}), Upload(table, Shape{3, 2}), 4, out)
          .ok());
  std::vector<double> expected;
  for (int b = 0; b < 3; ++b) {
    for (int i = 0; i < 4; ++i) {
      expected.push_back(static_cast<double>(in[b * 4 + i]) + table[i]);
    }
  }
  ExpectNear(Download(out), expected, kOneRoundingRel, kOneRoundingAbs, "in + row");
}

TEST_P(EmbeddingOpsTest, AddRowBroadcastInPlace) {
  const std::vector<float> in = TestValues(4, 2 * 3);
  const std::vector<float> row = TestValues(5, 3);
  Tensor x = Upload(in, Shape{2, 3});
  ASSERT_TRUE(ops().embedding.AddRowBroadcast(x, Upload(row, Shape{3}), 3, x).ok());
  std::vector<double> expected;
  for (int i = 0; i < 6; ++i) expected.push_back(static_cast<double>(in[i]) + row[i % 3]);
  ExpectNear(Download(x), expected, kOneRoundingRel, kOneRoundingAbs, "x += row");
}

TEST_P(EmbeddingOpsTest, AddRowBroadcastRejectsMismatchedSizes) {
  Tensor out = Uninitialized(Shape{2, 3});
  // 6 elements are not rows of 4.
  EXPECT_EQ(ops().embedding.AddRowBroadcast(Zeros(Shape{2, 3}), Zeros(Shape{4}), 4, out).code(),
            absl::StatusCode::kInvalidArgument);
  // The row is shorter than n.
  EXPECT_EQ(ops().embedding.AddRowBroadcast(Zeros(Shape{2, 3}), Zeros(Shape{2}), 3, out).code(),
            absl::StatusCode::kInvalidArgument);
  // out differs from in.
  Tensor big = Uninitialized(Shape{3, 3});
  EXPECT_EQ(ops().embedding.AddRowBroadcast(Zeros(Shape{2, 3}), Zeros(Shape{3}), 3, big).code(),
            absl::StatusCode::kInvalidArgument);
}

GPIPE_INSTANTIATE_ON_EVERY_BACKEND(EmbeddingOpsTest);

}  // namespace
}  // namespace gpipe::testing
