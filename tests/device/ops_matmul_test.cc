// Conformance of the matmul ops family on every backend (see backends_under_test.h): Gemm
// against a plain double-precision triple loop over the same views.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/bf16.h"
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {
namespace {

// Inputs are uniform in [-1, 1] and k <= 80, so a float32 dot product carries a rounding error
// of about sqrt(k) * 2^-24 * sum|a b| (~1e-6; the worst case k * 2^-24 * k is ~4e-4 and never
// reached). Any wrong index, stride or missing term errs by >= 1e-2, far above these.
constexpr double kGemmAbsTol = 1e-4;
constexpr double kGemmRelTol = 1e-5;

// The host-side description of a view over a host copy of its tensor's values.
struct HostView {
  int64_t offset = 0, rows = 0, cols = 0, ld = 0, batch_stride = 0;
};

MatrixView OnDevice(const Tensor& tensor, const HostView& v) {
  return {.tensor = tensor,
          .offset = v.offset,
          .rows = v.rows,
          .cols = v.cols,
          .ld = v.ld,
          .batch_stride = v.batch_stride};
}

struct OracleOptions {
  bool ta = false, tb = false;
  double alpha = 1.0, beta = 0.0;
  int64_t batch = 1;
  const std::vector<float>* bias = nullptr;
  bool bf16 = false;  // ProductPrecision::kBF16: A and B enter the product rounded to bf16
};

// The expected C values (all of C's tensor: elements outside the view keep `c`'s values).
std::vector<double> GemmOracle(const std::vector<float>& a, const HostView& av,
                               const std::vector<float>& b, const HostView& bv,
                               const std::vector<float>& c, const HostView& cv,
                               const OracleOptions& o) {
  std::vector<double> out(c.begin(), c.end());
  const int64_t k = o.ta ? av.rows : av.cols;
  for (int64_t p = 0; p < o.batch; ++p) {
    for (int64_t i = 0; i < cv.rows; ++i) {
      for (int64_t j = 0; j < cv.cols; ++j) {
        double sum = 0.0;
        for (int64_t q = 0; q < k; ++q) {
          const int64_t ai = o.ta ? q * av.ld + i : i * av.ld + q;
          const int64_t bi = o.tb ? j * bv.ld + q : q * bv.ld + j;
          float x = a[av.offset + p * av.batch_stride + ai];
          float y = b[bv.offset + p * bv.batch_stride + bi];
          if (o.bf16) {
            x = RoundToBf16(x);
            y = RoundToBf16(y);
          }
          sum += static_cast<double>(x) * y;
        }
        const int64_t ci = cv.offset + p * cv.batch_stride + i * cv.ld + j;
        double value = o.alpha * sum;
        if (o.beta != 0.0) value += o.beta * c[ci];
        if (o.bias != nullptr) value += (*o.bias)[j];
        out[ci] = value;
      }
    }
  }
  return out;
}

// A dense [rows, cols] view of a whole tensor.
HostView Dense(int64_t rows, int64_t cols) { return {.rows = rows, .cols = cols, .ld = cols}; }

// One product of the bf16 tests: tensor sizes, views, options.
struct GemmCase {
  int64_t a_size = 0;
  HostView av;
  int64_t b_size = 0;
  HostView bv;
  int64_t c_size = 0;
  HostView cv;
  OracleOptions o;
  std::string what;
};

// The shape families at ProductPrecision::kBF16: every transpose at m = 5 and 70, plain and with
// alpha, beta and `bias` (f32 [7]), and attention's strided heads (batched, with an offset).
std::vector<GemmCase> Bf16Cases(const std::vector<float>* bias) {
  std::vector<GemmCase> cases;
  for (int64_t m : {5, 70}) {
    constexpr int64_t n = 7, k = 40;
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const HostView av = ta ? Dense(k, m) : Dense(m, k);
        const HostView bv = tb ? Dense(n, k) : Dense(k, n);
        const std::string where = absl::StrCat("m ", m, " ta ", ta, " tb ", tb);
        cases.push_back(
            {m * k, av, k * n, bv, m * n, Dense(m, n), {.ta = ta, .tb = tb, .bf16 = true}, where});
        cases.push_back(
            {m * k,
             av,
             k * n,
             bv,
             m * n,
             Dense(m, n),
             {.ta = ta, .tb = tb, .alpha = 0.5, .beta = 1.0, .bias = bias, .bf16 = true},
             where + " alpha beta bias"});
      }
    }
  }
  constexpr int64_t kHeads = 3, kT = 6, kDh = 8, kWidth = 3 * kHeads * kDh + 2, kOffset = 5;
  const HostView q{.offset = kOffset, .rows = kT, .cols = kDh, .ld = kWidth, .batch_stride = kDh};
  const HostView kv{
      .offset = kOffset + kHeads * kDh, .rows = kT, .cols = kDh, .ld = kWidth, .batch_stride = kDh};
  const HostView scores{.offset = 3, .rows = kT, .cols = kT, .ld = kT, .batch_stride = kT * kT};
  cases.push_back({kOffset + kT * kWidth,
                   q,
                   kOffset + kT * kWidth,
                   kv,
                   3 + kHeads * kT * kT + 4,
                   scores,
                   {.tb = true, .alpha = 0.5, .batch = kHeads, .bf16 = true},
                   "scores"});
  return cases;
}

class MatmulOpsTest : public OpsConformanceTest {
 protected:
  // Runs one Gemm on fresh tensors of the given sizes holding TestValues (C's from `c_init`
  // when given) and checks every element of C's tensor against the oracle.
  void CheckGemm(int64_t a_size, const HostView& av, int64_t b_size, const HostView& bv,
                 int64_t c_size, const HostView& cv, const OracleOptions& o,
                 const std::string& what, const std::vector<float>* c_init = nullptr) {
    const std::vector<float> a = TestValues(1, a_size);
    const std::vector<float> b = TestValues(2, b_size);
    const std::vector<float> c = c_init != nullptr ? *c_init : TestValues(3, c_size);
    const Tensor a_t = Upload(a, Shape{a_size});
    const Tensor b_t = Upload(b, Shape{b_size});
    const Tensor c_t = Upload(c, Shape{c_size});
    Tensor bias_t;
    if (o.bias != nullptr) bias_t = Upload(*o.bias, Shape{static_cast<int64_t>(o.bias->size())});
    const absl::Status status =
        ops().matmul.Gemm(OnDevice(a_t, av), OnDevice(b_t, bv), OnDevice(c_t, cv),
                          {.transpose_a = o.ta,
                           .transpose_b = o.tb,
                           .alpha = static_cast<float>(o.alpha),
                           .beta = static_cast<float>(o.beta),
                           .batch = o.batch,
                           .bias = o.bias != nullptr ? &bias_t : nullptr,
                           .precision = o.bf16 ? ProductPrecision::kBF16 : ProductPrecision::kF32});
    ASSERT_TRUE(status.ok()) << what << ": " << status;
    const std::vector<float> result = Download(c_t);
    ExpectNear(result, GemmOracle(a, av, b, bv, c, cv, o), kGemmRelTol, kGemmAbsTol, what);
    if (o.bf16) {
      // The inputs were rounded: the f32 product is measurably elsewhere (TestValues are not
      // bf16 values; bf16 keeps 8 significant bits, so terms move by up to 2^-9 relative).
      OracleOptions f32 = o;
      f32.bf16 = false;
      const std::vector<double> unrounded = GemmOracle(a, av, b, bv, c, cv, f32);
      double largest = 0;
      for (size_t i = 0; i < result.size(); ++i) {
        largest = std::max(largest, std::abs(result[i] - unrounded[i]));
      }
      EXPECT_GT(largest, 1e-4) << what << ": the bf16 product matches the unrounded one";
    }
  }
};

TEST_P(MatmulOpsTest, EveryTransposeCombination) {
  // m, n, k distinct so a swapped dimension cannot pass; transposed and plain B take the CPU's
  // two paths (matmul primitive, sgemm), at few and many rows.
  for (int64_t m : {5, 70}) {
    constexpr int64_t n = 7, k = 6;
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const HostView av = ta ? Dense(k, m) : Dense(m, k);
        const HostView bv = tb ? Dense(n, k) : Dense(k, n);
        CheckGemm(m * k, av, k * n, bv, m * n, Dense(m, n), {.ta = ta, .tb = tb},
                  absl::StrCat("m ", m, " ta ", ta, " tb ", tb));
      }
    }
  }
}

TEST_P(MatmulOpsTest, AlphaScalesAndBetaAccumulates) {
  for (int64_t m : {4, 66}) {
    for (bool tb : {false, true}) {
      constexpr int64_t n = 9, k = 11;
      const HostView bv = tb ? Dense(n, k) : Dense(k, n);
      CheckGemm(m * k, Dense(m, k), k * n, bv, m * n, Dense(m, n),
                {.tb = tb, .alpha = 0.5, .beta = 1.0}, absl::StrCat("beta 1, m ", m, " tb ", tb));
      CheckGemm(m * k, Dense(m, k), k * n, bv, m * n, Dense(m, n),
                {.tb = tb, .alpha = -2.0, .beta = 0.25},
                absl::StrCat("beta 0.25, m ", m, " tb ", tb));
    }
  }
}

TEST_P(MatmulOpsTest, BiasIsAddedToEveryRow) {
  constexpr int64_t n = 10, k = 12;
  const std::vector<float> bias = TestValues(9, n);
  for (int64_t m : {3, 65}) {
    for (bool tb : {false, true}) {
      const HostView bv = tb ? Dense(n, k) : Dense(k, n);
      const std::string where = absl::StrCat(" m ", m, " tb ", tb);
      CheckGemm(m * k, Dense(m, k), k * n, bv, m * n, Dense(m, n), {.tb = tb, .bias = &bias},
                "bias, beta 0" + where);
      CheckGemm(m * k, Dense(m, k), k * n, bv, m * n, Dense(m, n),
                {.tb = tb, .beta = 1.0, .bias = &bias}, "bias, beta 1" + where);
      CheckGemm(m * k, Dense(m, k), k * n, bv, m * n, Dense(m, n),
                {.tb = tb, .alpha = 0.5, .beta = 0.5, .bias = &bias},
                "bias, alpha 0.5, beta 0.5" + where);
    }
  }
}

TEST_P(MatmulOpsTest, BatchedStridedViewsWithOffsetsLeaveTheRestUntouched) {
  // Attention's layout: H heads of [T, dh] side by side in rows of width W > H dh, starting at
  // an offset; C's heads interleave the same way, so a write outside a head shows.
  constexpr int64_t kHeads = 3, kT = 6, kDh = 4, kWidth = 3 * kHeads * kDh + 2, kOffset = 5;
  const HostView q{.offset = kOffset, .rows = kT, .cols = kDh, .ld = kWidth, .batch_stride = kDh};
  const HostView kv{
      .offset = kOffset + kHeads * kDh, .rows = kT, .cols = kDh, .ld = kWidth, .batch_stride = kDh};
  const HostView scores{.offset = 3, .rows = kT, .cols = kT, .ld = kT, .batch_stride = kT * kT};
  const int64_t qkv_size = kOffset + kT * kWidth;
  const int64_t scores_size = 3 + kHeads * kT * kT + 4;
  // S_h = 0.5 q_h k_h^T (B transposed: the CPU's strided matmul primitive), then O_h = S_h v_h
  // written between other heads' columns (B plain: the CPU's sgemm per batch entry).
  CheckGemm(qkv_size, q, qkv_size, kv, scores_size, scores,
            {.tb = true, .alpha = 0.5, .batch = kHeads}, "scores");
  const HostView heads{
      .offset = 2, .rows = kT, .cols = kDh, .ld = kHeads * kDh + 1, .batch_stride = kDh};
  const int64_t heads_size = 2 + kT * (kHeads * kDh + 1);
  CheckGemm(scores_size, scores, qkv_size, kv, heads_size, heads, {.batch = kHeads}, "P v");
  // Transposed A through a batch (dk = dS^T q), accumulating.
  CheckGemm(scores_size, scores, qkv_size, q, heads_size, heads,
            {.ta = true, .beta = 1.0, .batch = kHeads}, "dS^T q");
  // Padded rows (ld > cols) in every operand, batched, both paths.
  const HostView tall_a{.offset = 1, .rows = 70, .cols = 5, .ld = 7, .batch_stride = 70 * 7};
  const HostView tall_c{.offset = 0, .rows = 70, .cols = 3, .ld = 4, .batch_stride = 70 * 4};
  const HostView plain_b{.offset = 0, .rows = 5, .cols = 3, .ld = 4, .batch_stride = 20};
  const HostView transposed_b{.offset = 1, .rows = 3, .cols = 5, .ld = 6, .batch_stride = 20};
  CheckGemm(1 + 2 * 70 * 7, tall_a, 2 * 20, plain_b, 2 * 70 * 4, tall_c, {.batch = 2},
            "padded batch, B plain");
  CheckGemm(1 + 2 * 70 * 7, tall_a, 2 * 20, transposed_b, 2 * 70 * 4, tall_c,
            {.tb = true, .beta = 0.5, .batch = 2}, "padded batch, B transposed");
}

// Mixed precision: every shape family above at ProductPrecision::kBF16 agrees with the oracle on
// the bf16-rounded inputs (products exact, f32 accumulation) as tightly as f32 products do with
// theirs.
TEST_P(MatmulOpsTest, Bf16ProductsRoundTheirInputsAndAccumulateInF32) {
  const std::vector<float> bias = TestValues(9, 7);
  for (const GemmCase& c : Bf16Cases(&bias)) {
    CheckGemm(c.a_size, c.av, c.b_size, c.bv, c.c_size, c.cv, c.o, "bf16 " + c.what);
  }
}

// At kBF16, A and B may view bf16 tensors: the values enter as they are (no rounding, no packed
// copy where the backend reads views in place). Every mix of bf16 and f32 operands, transposes,
// alpha/beta/bias and attention's strided batched heads agrees with the rounded-input oracle as
// tightly as f32 operands do; the CPU, which packs both kinds into the same dense copy, gives the
// same bits as the f32 operands those bf16 values came from (cuBLAS may pick another kernel for
// another leading dimension, so CUDA is held to the oracle only).
TEST_P(MatmulOpsTest, Bf16OperandsEnterAsTheyAre) {
  const bool same_bits = GetParam().name == "cpu";
  const std::vector<float> bias_values = TestValues(9, 7);
  const Tensor bias = Upload(bias_values, Shape{7});
  // Runs the product with A and/or B narrowed to bf16 tensors and checks it.
  const auto check = [&](int64_t a_size, const HostView& av, int64_t b_size, const HostView& bv,
                         int64_t c_size, const HostView& cv, const OracleOptions& o,
                         const std::string& what) {
    const std::vector<float> a = TestValues(1, a_size);
    const std::vector<float> b = TestValues(2, b_size);
    const std::vector<float> c = TestValues(3, c_size);
    const Tensor a32 = Upload(a, Shape{a_size});
    const Tensor b32 = Upload(b, Shape{b_size});
    Tensor a16 = Uninitialized(Shape{a_size}, DType::kBF16);
    Tensor b16 = Uninitialized(Shape{b_size}, DType::kBF16);
    ASSERT_TRUE(ops().tensor.Cast(a32, a16).ok());
    ASSERT_TRUE(ops().tensor.Cast(b32, b16).ok());
    const GemmOptions options{.transpose_a = o.ta,
                              .transpose_b = o.tb,
                              .alpha = static_cast<float>(o.alpha),
                              .beta = static_cast<float>(o.beta),
                              .batch = o.batch,
                              .bias = o.bias != nullptr ? &bias : nullptr,
                              .precision = ProductPrecision::kBF16};
    const auto run = [&](const Tensor& at, const Tensor& bt) {
      const Tensor ct = Upload(c, Shape{c_size});
      const absl::Status status =
          ops().matmul.Gemm(OnDevice(at, av), OnDevice(bt, bv), OnDevice(ct, cv), options);
      EXPECT_TRUE(status.ok()) << what << ": " << status;
      return Download(ct);
    };
    const std::vector<float> from_f32 = run(a32, b32);
    const std::vector<double> oracle = GemmOracle(a, av, b, bv, c, cv, o);
    using Mix = std::tuple<const Tensor*, const Tensor*, const char*>;
    for (const auto& [at, bt, which] :
         {Mix{&a16, &b32, "A bf16"}, Mix{&a32, &b16, "B bf16"}, Mix{&a16, &b16, "A and B bf16"}}) {
      const std::string where = absl::StrCat(what, ", ", which);
      const std::vector<float> result = run(*at, *bt);
      ExpectNear(result, oracle, kGemmRelTol, kGemmAbsTol, where);
      if (same_bits) {
        EXPECT_EQ(result, from_f32) << where;
      }
    }
  };
  for (const GemmCase& c : Bf16Cases(&bias_values)) {
    check(c.a_size, c.av, c.b_size, c.bv, c.c_size, c.cv, c.o, c.what);
  }
}

// At kBF16 with beta == 0, C may view a bf16 tensor (mixed precision's storage): it gets the f32
// result rounded to nearest even, the bits an f32 C and a Cast give, for every shape family (the
// CPU's oneDNN writing bf16 itself, and its f32 path where alpha scales a bias); elements outside
// the view keep their values. k == 0 gives the bias, or zeros, rounded.
TEST_P(MatmulOpsTest, Bf16CHoldsTheF32ResultRounded) {
  const std::vector<float> bias_values = TestValues(9, 7);
  const Tensor bias = Upload(bias_values, Shape{7});
  const auto check = [&](int64_t a_size, const HostView& av, int64_t b_size, const HostView& bv,
                         int64_t c_size, const HostView& cv, const GemmOptions& options,
                         const std::string& what) {
    const Tensor a = Upload(TestValues(1, a_size), Shape{a_size});
    const Tensor b = Upload(TestValues(2, b_size), Shape{b_size});
    const std::vector<float> start = TestValues(3, c_size);
    const Tensor c32 = Upload(start, Shape{c_size});
    ASSERT_TRUE(
        ops().matmul.Gemm(OnDevice(a, av), OnDevice(b, bv), OnDevice(c32, cv), options).ok())
        << what;
    Tensor c16 = Uninitialized(Shape{c_size}, DType::kBF16);
    ASSERT_TRUE(ops().tensor.Cast(Upload(start, Shape{c_size}), c16).ok());
    const absl::Status status =
        ops().matmul.Gemm(OnDevice(a, av), OnDevice(b, bv), OnDevice(c16, cv), options);
    ASSERT_TRUE(status.ok()) << what << ": " << status;
    Tensor wide = Uninitialized(Shape{c_size});
    ASSERT_TRUE(ops().tensor.Cast(c16, wide).ok());
    std::vector<float> expected = Download(c32);
    for (float& v : expected) v = RoundToBf16(v);
    EXPECT_EQ(Download(wide), expected) << what;
  };
  for (GemmCase c : Bf16Cases(&bias_values)) {
    const GemmOptions options{.transpose_a = c.o.ta,
                              .transpose_b = c.o.tb,
                              .alpha = static_cast<float>(c.o.alpha),
                              .beta = 0.0f,
                              .batch = c.o.batch,
                              .bias = c.o.bias != nullptr ? &bias : nullptr,
                              .precision = ProductPrecision::kBF16};
    check(c.a_size, c.av, c.b_size, c.bv, c.c_size, c.cv, options, "bf16 C, " + c.what);
  }
  const Tensor bias4 = Upload(TestValues(9, 4), Shape{4});
  for (const Tensor* with_bias : {static_cast<const Tensor*>(nullptr), &bias4}) {
    check(1, {.rows = 2, .cols = 0, .ld = 1}, 1, {.rows = 0, .cols = 4, .ld = 4}, 8, Dense(2, 4),
          {.bias = with_bias, .precision = ProductPrecision::kBF16},
          with_bias != nullptr ? "bf16 C, k 0, bias" : "bf16 C, k 0");
  }
}

TEST_P(MatmulOpsTest, BetaZeroDoesNotReadC) {
  for (int64_t m : {4, 67}) {
    for (bool tb : {false, true}) {
      constexpr int64_t n = 8, k = 5;
      const std::vector<float> nans(2 * m * n, std::numeric_limits<float>::quiet_NaN());
      const HostView bv = tb ? Dense(n, k) : Dense(k, n);
      const HostView cv{.rows = m, .cols = n, .ld = n, .batch_stride = m * n};
      const HostView av{.rows = m, .cols = k, .ld = k, .batch_stride = 0};
      CheckGemm(m * k, av, k * n, {.rows = bv.rows, .cols = bv.cols, .ld = bv.ld}, 2 * m * n, cv,
                {.tb = tb, .batch = 2}, absl::StrCat("NaN C, m ", m, " tb ", tb), &nans);
    }
  }
}

TEST_P(MatmulOpsTest, EmptyProductsAndZeroDepth) {
  const std::vector<float> bias = TestValues(9, 4);
  // No rows, no columns, no batch: nothing is written.
  CheckGemm(6, Dense(0, 3), 12, Dense(3, 4), 4, Dense(0, 4), {}, "m 0");
  CheckGemm(6, Dense(2, 3), 12, Dense(3, 0), 4, Dense(2, 0), {}, "n 0");
  CheckGemm(6, Dense(2, 3), 12, Dense(3, 4), 8, Dense(2, 4), {.batch = 0}, "batch 0");
  // k == 0: C = beta C (+ bias).
  CheckGemm(1, {.rows = 2, .cols = 0, .ld = 1}, 1, {.rows = 0, .cols = 4, .ld = 4}, 8, Dense(2, 4),
            {.beta = 0.5, .bias = &bias}, "k 0, beta 0.5, bias");
  const std::vector<float> nans(8, std::numeric_limits<float>::quiet_NaN());
  CheckGemm(1, {.rows = 2, .cols = 0, .ld = 1}, 1, {.rows = 0, .cols = 4, .ld = 4}, 8, Dense(2, 4),
            {}, "k 0, beta 0", &nans);
}

TEST_P(MatmulOpsTest, RejectsBadViewsBeforeTouchingMemory) {
  const std::vector<float> c_values = TestValues(3, 12);
  const Tensor a = Upload(TestValues(1, 12), Shape{12});
  const Tensor b = Upload(TestValues(2, 12), Shape{12});
  const Tensor c = Upload(c_values, Shape{12});
  const Tensor bias = Upload(TestValues(4, 5), Shape{5});
  const Tensor ids = UploadIds(std::vector<int64_t>(12, 0), Shape{12});
  const Tensor half = Zeros(Shape{12}, DType::kBF16);
  const MatrixView a34 = WholeMatrix(a, 3, 4);
  const MatrixView b43 = WholeMatrix(b, 4, 3);
  const MatrixView c33{.tensor = c, .rows = 3, .cols = 3, .ld = 3};
  struct Case {
    std::string what;
    MatrixView a, b, c;
    GemmOptions options;
  };
  const std::vector<Case> cases = {
      {"A past its end", {a, 1, 3, 4, 4, 0}, b43, c33, {}},
      {"C past its end", a34, b43, {c, 4, 3, 3, 3, 0}, {}},
      {"second batch entry of C past the end", a34, b43, {c, 0, 3, 3, 3, 9}, {.batch = 2}},
      {"batch stride leaves B", a34, {b, 0, 4, 3, 3, 1}, c33, {.batch = 2}},
      {"ld < cols", {a, 0, 3, 4, 3, 0}, b43, c33, {}},
      {"negative offset", {a, -1, 3, 4, 4, 0}, b43, c33, {}},
      {"negative batch", a34, b43, c33, {.batch = -1}},
      {"k mismatch", a34, b43, c33, {.transpose_b = true}},
      {"C shape mismatch", a34, b43, {c, 0, 3, 4, 4, 0}, {}},
      {"bias of the wrong size", a34, b43, c33, {.bias = &bias}},
      {"i64 tensor", a34, b43, {ids, 0, 3, 3, 3, 0}, {}},
      {"undefined tensor", {Tensor(), 0, 3, 4, 4, 0}, b43, c33, {}},
      {"bf16 A at f32 precision", {half, 0, 3, 4, 4, 0}, b43, c33, {}},
      {"bf16 B at f32 precision", a34, {half, 0, 4, 3, 3, 0}, c33, {}},
      {"bf16 C at f32 precision", a34, b43, {half, 0, 3, 3, 3, 0}, {}},
      {"bf16 C accumulated into",
       a34,
       b43,
       {half, 0, 3, 3, 3, 0},
       {.beta = 1.0f, .precision = ProductPrecision::kBF16}},
      {"bf16 A past its end",
       {half, 1, 3, 4, 4, 0},
       b43,
       c33,
       {.precision = ProductPrecision::kBF16}},
  };
  for (const Case& test : cases) {
    const absl::Status status = ops().matmul.Gemm(test.a, test.b, test.c, test.options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << test.what << ": " << status;
    EXPECT_NE(status.message().find("Gemm"), std::string::npos) << test.what << ": " << status;
  }
  EXPECT_EQ(Download(c), c_values) << "a rejected Gemm wrote C";
}

GPIPE_INSTANTIATE_ON_EVERY_BACKEND(MatmulOpsTest);

}  // namespace
}  // namespace gpipe::testing
