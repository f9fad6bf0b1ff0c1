// Conformance of the rotary q/k/v packing (AttentionOps::PackRotaryQkv, UnpackRotaryQkvGrad) on
// every backend (see backends_under_test.h): the packed qkv against a direct double evaluation
// of RotaryQkvArgs' formula (rotate-half pairs, key/value heads repeated for their query heads,
// positions restarting in every sample), the gradient against the same formula transposed and
// against the adjoint identity <Pack(x), y> = <x, Unpack(y)>, over grouped-query shapes from
// multi-head (kv_heads = heads) to multi-query (kv_heads = 1).
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {
namespace {

// Values in [-1, 1] rotated by angles up to t - 1 = 4 radians: the backends take the angle in
// f32 (s * inv_freq, each rounded: ~5e-7 absolute at 4 rad) and cos and sin rounded to f32, then
// two f32 products and a sum: ~1e-6 absolute at most; 2e-6 still catches a swapped pair, a wrong
// sign or frequency (>= 4e-3 here: the slowest pair turns by 4e-3 at s = 4 with theta 10000).
constexpr double kRotaryAbs = 2e-6;
constexpr double kRotaryRel = 1e-6;
// The gradient of a key head sums up to 4 query heads' values in f32 before the rotation.
constexpr double kRotaryGradAbs = 5e-6;
// <Pack(x), y> and <x, Unpack(y)>: the same products in another order and rounding, relative to
// the sum of |terms|.
constexpr double kAdjointRel = 1e-5;

struct RotaryCase {
  RotaryQkvArgs args;
  std::string name;
};

std::vector<RotaryCase> Cases() {
  std::vector<RotaryCase> cases;
  for (const int64_t kv_heads : {int64_t{4}, int64_t{2}, int64_t{1}}) {
    for (const int64_t head_dim : {int64_t{4}, int64_t{8}}) {
      for (const double theta : {10000.0, 100.0}) {
        cases.push_back(
            {{.batch = 2,
              .t = 5,
              .heads = 4,
              .kv_heads = kv_heads,
              .head_dim = head_dim,
              .rope_theta = theta},
             absl::StrCat("kv_heads ", kv_heads, ", head_dim ", head_dim, ", theta ", theta)});
      }
    }
  }
  return cases;
}

// The angle of pair i at position s, in double: s / theta^(2i / d).
double Angle(const RotaryQkvArgs& args, int64_t s, int64_t i) {
  return static_cast<double>(s) /
         std::pow(args.rope_theta, 2.0 * static_cast<double>(i) / args.head_dim);
}

// rope(x) of one head at position s, in double; `sign` -1 rotates back. T: float (the inputs)
// or double (the gradient's sums).
template <typename T>
void RotateHead(const RotaryQkvArgs& args, int64_t s, const T* x, double sign, double* out) {
  const int64_t half = args.head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double angle = sign * Angle(args, s, i);
    out[i] = x[i] * std::cos(angle) - x[i + half] * std::sin(angle);
    out[i + half] = x[i + half] * std::cos(angle) + x[i] * std::sin(angle);
  }
}

// qkv [batch, t, 3, heads, head_dim] from the definition: query head h at position s is
// rope(q_h); its key and value are key/value head h / (heads / kv_heads), the key rotated.
std::vector<double> PackOracle(const RotaryQkvArgs& args, const std::vector<float>& q,
                               const std::vector<float>& k, const std::vector<float>& v) {
  const int64_t d = args.head_dim;
  const int64_t rows = args.batch * args.t;
  std::vector<double> qkv(rows * 3 * args.heads * d);
  for (int64_t b = 0; b < args.batch; ++b) {
    for (int64_t s = 0; s < args.t; ++s) {
      const int64_t row = b * args.t + s;
      for (int64_t h = 0; h < args.heads; ++h) {
        const int64_t kv = h / (args.heads / args.kv_heads);
        double* out = qkv.data() + row * 3 * args.heads * d;
        RotateHead(args, s, q.data() + (row * args.heads + h) * d, 1.0, out + h * d);
        RotateHead(args, s, k.data() + (row * args.kv_heads + kv) * d, 1.0,
                   out + (args.heads + h) * d);
        for (int64_t i = 0; i < d; ++i) {
          out[(2 * args.heads + h) * d + i] = v[(row * args.kv_heads + kv) * d + i];
        }
      }
    }
  }
  return qkv;
}

struct QkvGrad {
  std::vector<double> dq, dk, dv;
};

// The transpose: dq_h = rope^-1(dqkv's q_h); dk_g and dv_g sum dqkv's keys and values of the
// query heads that read head g (in double), the key sum rotated back.
QkvGrad UnpackOracle(const RotaryQkvArgs& args, const std::vector<float>& dqkv) {
  const int64_t d = args.head_dim;
  const int64_t rows = args.batch * args.t;
  QkvGrad grad{std::vector<double>(rows * args.heads * d),
               std::vector<double>(rows * args.kv_heads * d),
               std::vector<double>(rows * args.kv_heads * d, 0.0)};
  std::vector<double> key_sums(rows * args.kv_heads * d, 0.0);
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t s = row % args.t;
    const float* in = dqkv.data() + row * 3 * args.heads * d;
    for (int64_t h = 0; h < args.heads; ++h) {
      RotateHead(args, s, in + h * d, -1.0, grad.dq.data() + (row * args.heads + h) * d);
      const int64_t kv = h / (args.heads / args.kv_heads);
      for (int64_t i = 0; i < d; ++i) {
        key_sums[(row * args.kv_heads + kv) * d + i] += in[(args.heads + h) * d + i];
        grad.dv[(row * args.kv_heads + kv) * d + i] += in[(2 * args.heads + h) * d + i];
      }
    }
    for (int64_t g = 0; g < args.kv_heads; ++g) {
      const int64_t at = (row * args.kv_heads + g) * d;
      RotateHead(args, s, key_sums.data() + at, -1.0, grad.dk.data() + at);
    }
  }
  return grad;
}

class RotaryQkvOpsTest : public OpsConformanceTest {
 protected:
  Shape Of(const RotaryQkvArgs& args, int64_t width) { return Shape{args.batch, args.t, width}; }
};

TEST_P(RotaryQkvOpsTest, PackMatchesTheFormulaAndCopiesValuesExactly) {
  for (const RotaryCase& c : Cases()) {
    const RotaryQkvArgs& args = c.args;
    const int64_t width = args.heads * args.head_dim;
    const int64_t kv_width = args.kv_heads * args.head_dim;
    const int64_t rows = args.batch * args.t;
    const std::vector<float> q = TestValues(71, rows * width);
    const std::vector<float> k = TestValues(72, rows * kv_width);
    const std::vector<float> v = TestValues(73, rows * kv_width);
    Tensor qkv = Uninitialized(Of(args, 3 * width));
    ASSERT_TRUE(ops()
                    .attention
                    .PackRotaryQkv(args, Upload(q, Of(args, width)), Upload(k, Of(args, kv_width)),
                                   Upload(v, Of(args, kv_width)), qkv)
                    .ok())
        << c.name;
    const std::vector<float> packed = Download(qkv);
    const std::vector<double> expected = PackOracle(args, q, k, v);
    ExpectNear(packed, expected, kRotaryRel, kRotaryAbs, c.name + ", qkv");
    // The value thirds are copies: the same bits.
    std::vector<float> values;
    std::vector<double> expected_values;
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t j = 2 * width; j < 3 * width; ++j) {
        values.push_back(packed[row * 3 * width + j]);
        expected_values.push_back(expected[row * 3 * width + j]);
      }
    }
    ExpectNear(values, expected_values, 0.0, 0.0, c.name + ", values");
  }
}

TEST_P(RotaryQkvOpsTest, UnpackIsTheTransposeOfPack) {
  for (const RotaryCase& c : Cases()) {
    const RotaryQkvArgs& args = c.args;
    const int64_t width = args.heads * args.head_dim;
    const int64_t kv_width = args.kv_heads * args.head_dim;
    const int64_t rows = args.batch * args.t;
    const std::vector<float> dqkv = TestValues(74, rows * 3 * width);
    Tensor dq = Uninitialized(Of(args, width));
    Tensor dk = Uninitialized(Of(args, kv_width));
    Tensor dv = Uninitialized(Of(args, kv_width));
    ASSERT_TRUE(
        ops()
            .attention.UnpackRotaryQkvGrad(args, Upload(dqkv, Of(args, 3 * width)), dq, dk, dv)
            .ok())
        << c.name;
    const QkvGrad expected = UnpackOracle(args, dqkv);
    ExpectNear(Download(dq), expected.dq, kRotaryRel, kRotaryAbs, c.name + ", dq");
    ExpectNear(Download(dk), expected.dk, kRotaryRel, kRotaryGradAbs, c.name + ", dk");
    ExpectNear(Download(dv), expected.dv, kRotaryRel, kRotaryGradAbs, c.name + ", dv");

    // <Pack(x), y> = <x, Unpack(y)> with y = dqkv, each side in double from the backend's f32.
    const std::vector<float> q = TestValues(75, rows * width);
    const std::vector<float> k = TestValues(76, rows * kv_width);
    const std::vector<float> v = TestValues(77, rows * kv_width);
    Tensor qkv = Uninitialized(Of(args, 3 * width));
    ASSERT_TRUE(ops()
                    .attention
                    .PackRotaryQkv(args, Upload(q, Of(args, width)), Upload(k, Of(args, kv_width)),
                                   Upload(v, Of(args, kv_width)), qkv)
                    .ok());
    const std::vector<float> packed = Download(qkv);
    double packed_dot = 0.0, scale = 0.0;
    for (size_t i = 0; i < packed.size(); ++i) {
      packed_dot += static_cast<double>(packed[i]) * dqkv[i];
      scale += std::abs(static_cast<double>(packed[i]) * dqkv[i]);
    }
    double unpacked_dot = 0.0;
    const auto add_dot = [&](const std::vector<float>& x, const std::vector<float>& grad) {
      for (size_t i = 0; i < x.size(); ++i) unpacked_dot += static_cast<double>(x[i]) * grad[i];
    };
    add_dot(q, Download(dq));
    add_dot(k, Download(dk));
    add_dot(v, Download(dv));
    EXPECT_NEAR(packed_dot, unpacked_dot, kAdjointRel * scale) << c.name;
  }
}

// With as many key/value heads as query heads nothing is summed: dv is dqkv's last third.
TEST_P(RotaryQkvOpsTest, UnpackWithoutGroupsCopiesValueGradientsExactly) {
  const RotaryQkvArgs args{.batch = 2, .t = 5, .heads = 3, .kv_heads = 3, .head_dim = 6};
  const int64_t width = args.heads * args.head_dim;
  const int64_t rows = args.batch * args.t;
  const std::vector<float> dqkv = TestValues(78, rows * 3 * width);
  Tensor dq = Uninitialized(Of(args, width));
  Tensor dk = Uninitialized(Of(args, width));
  Tensor dv = Uninitialized(Of(args, width));
  ASSERT_TRUE(
      ops()
          .attention.UnpackRotaryQkvGrad(args, Upload(dqkv, Of(args, 3 * width)), dq, dk, dv)
          .ok());
  std::vector<double> expected;
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t j = 2 * width; j < 3 * width; ++j) expected.push_back(dqkv[row * 3 * width + j]);
  }
  ExpectNear(Download(dv), expected, 0.0, 0.0, "dv");
}

// Mixed precision's storage: a bf16 qkv holds the f32 pack rounded to nearest even, and a bf16
// dqkv unpacks as its exact widening does, bit for bit.
TEST_P(RotaryQkvOpsTest, Bf16QkvIsTheF32PackRoundedAndBf16DqkvReadsItsWidening) {
  for (const RotaryCase& c : Cases()) {
    const RotaryQkvArgs& args = c.args;
    const int64_t width = args.heads * args.head_dim;
    const int64_t kv_width = args.kv_heads * args.head_dim;
    const int64_t rows = args.batch * args.t;
    const Tensor q = Upload(TestValues(81, rows * width), Of(args, width));
    const Tensor k = Upload(TestValues(82, rows * kv_width), Of(args, kv_width));
    const Tensor v = Upload(TestValues(83, rows * kv_width), Of(args, kv_width));
    Tensor qkv32 = Uninitialized(Of(args, 3 * width));
    Tensor qkv16 = Uninitialized(Of(args, 3 * width), DType::kBF16);
    ASSERT_TRUE(ops().attention.PackRotaryQkv(args, q, k, v, qkv32).ok()) << c.name;
    ASSERT_TRUE(ops().attention.PackRotaryQkv(args, q, k, v, qkv16).ok()) << c.name;
    EXPECT_EQ(ValuesOf(qkv16, false), ValuesOf(qkv32, /*round=*/true)) << c.name;

    const std::vector<float> dqkv = TestValues(84, rows * 3 * width);
    auto unpack = [&](DType dtype) {
      Tensor dq = Uninitialized(Of(args, width));
      Tensor dk = Uninitialized(Of(args, kv_width));
      Tensor dv = Uninitialized(Of(args, kv_width));
      EXPECT_TRUE(
          ops()
              .attention
              .UnpackRotaryQkvGrad(args, Bf16Values(dqkv, dtype, Of(args, 3 * width)), dq, dk, dv)
              .ok())
          << c.name;
      return std::vector<std::vector<float>>{Download(dq), Download(dk), Download(dv)};
    };
    EXPECT_EQ(unpack(DType::kBF16), unpack(DType::kF32)) << c.name;
  }
}

TEST_P(RotaryQkvOpsTest, NoSamplesOrPositionsIsFine) {
  for (const auto& [batch, t] : {std::pair<int64_t, int64_t>{0, 5}, {2, 0}}) {
    const RotaryQkvArgs args{.batch = batch, .t = t, .heads = 4, .kv_heads = 2, .head_dim = 4};
    Tensor qkv = Uninitialized(Of(args, 48));
    EXPECT_TRUE(ops()
                    .attention
                    .PackRotaryQkv(args, Uninitialized(Of(args, 16)), Uninitialized(Of(args, 8)),
                                   Uninitialized(Of(args, 8)), qkv)
                    .ok());
    Tensor dq = Uninitialized(Of(args, 16));
    Tensor dk = Uninitialized(Of(args, 8));
    Tensor dv = Uninitialized(Of(args, 8));
    EXPECT_TRUE(
        ops().attention.UnpackRotaryQkvGrad(args, Uninitialized(Of(args, 48)), dq, dk, dv).ok());
  }
}

GPIPE_INSTANTIATE_ON_EVERY_BACKEND(RotaryQkvOpsTest);

}  // namespace
}  // namespace gpipe::testing
