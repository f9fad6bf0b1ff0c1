// Conformance of TensorOps::SumSquares on every backend (see backends_under_test.h): each sum
// against an extended-precision oracle within the bound of a double sum, the CPU's exact
// element-order bits (what gradient clipping's norms were before the op), and the determinism
// the gradient norm relies on: a tensor's sum has the same bits wherever it sits in the span.
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {
namespace {

class SumSquaresTest : public OpsConformanceTest {
 protected:
  // The sums of squares of `tensors`, computed by the backend.
  std::vector<double> SumSquares(const std::vector<Tensor>& tensors) {
    Tensor out = Uninitialized(Shape{static_cast<int64_t>(tensors.size())}, DType::kF64);
    const absl::Status status = ops().tensor.SumSquares(tensors, out);
    EXPECT_TRUE(status.ok()) << status;
    return DownloadF64(out);
  }
};
GPIPE_INSTANTIATE_ON_EVERY_BACKEND(SumSquaresTest);

// An oracle independent of any summation order: long double (64-bit mantissa on x86) holds
// every partial sum of these squares far more precisely than a double does.
double SumSquaresOracle(const std::vector<float>& values) {
  long double sum = 0;
  for (float v : values) sum += static_cast<long double>(v) * static_cast<long double>(v);
  return static_cast<double>(sum);
}

// A square of a float is exact in double, and a sum of n non-negative doubles in any order is
// within (n - 1) * 2^-53 of the exact sum, relatively.
void ExpectWithinDoubleSumBound(double actual, double expected, int64_t n,
                                const std::string& what) {
  const double bound = static_cast<double>(n) * 0x1p-53 * expected;
  EXPECT_LE(std::abs(actual - expected), bound) << what << ": " << actual << " vs " << expected;
}

uint64_t Bits(double value) { return std::bit_cast<uint64_t>(value); }

TEST_P(SumSquaresTest, SmallTensorsGiveTheirExactSums) {
  const std::vector<double> sums =
      SumSquares({Upload({3.0f, 4.0f}, Shape{2}), Upload({0.5f, -2.0f}, Shape{1, 2}),
                  Upload({}, Shape{0}), Upload({-1.0f}, Shape{1})});
  EXPECT_EQ(sums, (std::vector<double>{25.0, 4.25, 0.0, 1.0}));
}

TEST_P(SumSquaresTest, EachSumMatchesAnExtendedPrecisionOracle) {
  const std::vector<int64_t> sizes = {0, 1, 255, 256, 257, 4099, 65537, 3'000'000};
  std::vector<std::vector<float>> values;
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < sizes.size(); ++i) {
    values.push_back(TestValues(100 + i, sizes[i], -3.0f, 3.0f));
    tensors.push_back(Upload(values.back(), Shape{sizes[i]}));
  }
  const std::vector<double> sums = SumSquares(tensors);
  ASSERT_EQ(sums.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    ExpectWithinDoubleSumBound(sums[i], SumSquaresOracle(values[i]), sizes[i],
                               absl::StrCat(sizes[i], " elements"));
  }
  EXPECT_EQ(Bits(sums[0]), Bits(0.0)) << "an empty tensor sums to +0";
}

// The CPU adds the squares in element order with one double accumulator: the host arithmetic
// training.clip_grad_norm used before the op, so CPU gradient norms keep their bits. Other
// backends sum in their own fixed order (the oracle test above bounds them).
TEST_P(SumSquaresTest, CpuSumsInElementOrderInDouble) {
  if (GetParam().name != "cpu") GTEST_SKIP() << "element order is the CPU backend's contract";
  const std::vector<float> values = TestValues(7, 100'003, -5.0f, 5.0f);
  double expected = 0;
  for (float v : values) expected += static_cast<double>(v) * static_cast<double>(v);
  const std::vector<double> sums = SumSquares({Upload(values, Shape{100'003})});
  EXPECT_EQ(Bits(sums.at(0)), Bits(expected));
}

// A stage's parameters change with the partition, so a tensor's sum must not depend on its
// neighbours, its position in the span or the call: more than 64 tensors (CUDA's group size),
// the same ones in several places, and a second call.
TEST_P(SumSquaresTest, ATensorsSumHasTheSameBitsAtEveryPositionAndCall) {
  const std::vector<float> large_values = TestValues(11, 3'000'000);
  const std::vector<float> medium_values = TestValues(12, 70'001);
  const Tensor large = Upload(large_values, Shape{3'000'000});
  const Tensor medium = Upload(medium_values, Shape{70'001});
  std::vector<Tensor> fillers;
  for (int i = 0; i < 70; ++i)
    fillers.push_back(Upload(TestValues(200 + i, 13 * i), Shape{13 * i}));

  const std::vector<double> alone = SumSquares({large, medium});
  std::vector<Tensor> mixed = fillers;
  mixed.insert(mixed.begin() + 3, medium);
  mixed.insert(mixed.begin() + 66, large);
  mixed.push_back(medium);
  const std::vector<double> sums = SumSquares(mixed);
  ASSERT_EQ(sums.size(), 73u);
  EXPECT_EQ(Bits(sums[66]), Bits(alone[0])) << "the large tensor after 65 others";
  EXPECT_EQ(Bits(sums[3]), Bits(alone[1])) << "the medium tensor at position 3";
  EXPECT_EQ(Bits(sums[72]), Bits(alone[1])) << "the medium tensor last, in another group";
  const std::vector<double> again = SumSquares({medium, large});
  EXPECT_EQ(Bits(again[0]), Bits(alone[1]));
  EXPECT_EQ(Bits(again[1]), Bits(alone[0]));

  ExpectWithinDoubleSumBound(alone[0], SumSquaresOracle(large_values), 3'000'000, "large");
  for (int i = 0; i < 70; ++i) {
    const int position = i < 3 ? i : (i < 65 ? i + 1 : i + 2);
    ExpectWithinDoubleSumBound(sums[position], SumSquaresOracle(TestValues(200 + i, 13 * i)),
                               13 * i, absl::StrCat("filler ", i));
  }
}

TEST_P(SumSquaresTest, AnEmptySpanWritesNothing) {
  Tensor out = Uninitialized(Shape{0}, DType::kF64);
  EXPECT_TRUE(ops().tensor.SumSquares({}, out).ok());
}

}  // namespace
}  // namespace gpipe::testing
