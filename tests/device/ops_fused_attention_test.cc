// Conformance of AttentionOps' fused causal attention on every backend (see
// backends_under_test.h): forward (O and the log-sum-exp) and backward (dq, dk, dv) against a
// naive softmax attention in double written here, at t = 1, at t not a multiple of any tile
// and past several tiles, with several heads, in f32 and bf16 products; plus the same bits run
// to run and whatever the batch split.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/bf16.h"
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {
namespace {

// f32 products (inputs in [-1, 1], head_dim <= 8): every score and every term of O carries a
// few 2^-24 relative of rounding and each exponential ~1 ulp, so O (a convex combination of
// values in [-1, 1]) and the log-sum-exp land within ~1e-7 of the exact values (CPU measured:
// O 8e-8, log-sum-exp 3e-7); any indexing, masking or rescaling error is >= 1e-3.
constexpr double kForwardAbsTol = 1e-6;
constexpr double kForwardRelTol = 1e-6;
// The gradients sum up to t terms of such products (CPU measured: 5e-7 at t = 131).
constexpr double kBackwardAbsTol = 5e-6;
constexpr double kBackwardRelTol = 5e-6;
// bf16 products: the oracle rounds q, k, v and dO as the kernels do; the kernels also round the
// unnormalized probabilities and dS to bf16 (2^-9 relative each) before their products, which
// moves O by up to ~2^-9 max|v| and the gradients by ~2^-9 of their larger terms (CPU
// measured: O 1.1e-3, dqkv 2.8e-3). Skipping the operands' rounding errs by 6e-3 to 1e-2.
constexpr double kBf16ForwardAbsTol = 3e-3;
constexpr double kBf16ForwardRelTol = 1e-3;
constexpr double kBf16BackwardAbsTol = 6e-3;
constexpr double kBf16BackwardRelTol = 2e-3;
// bf16 storage (every tensor bf16, head_dim 64 and 128: shapes cuDNN's engines take under
// runtime.cuda.cudnn_attention): the above, plus O and dqkv each rounded once to bf16 (2^-9
// relative) and D read from the rounded O. CPU measured: O 2.4e-3, log-sum-exp 2.5e-7, dqkv
// 5.4e-3 (t = 300, where dk and dv sum up to 300 terms and reach 1.9).
constexpr double kStorageForwardAbsTol = 6e-3;
constexpr double kStorageForwardRelTol = 4e-3;
constexpr double kStorageBackwardAbsTol = 2e-2;
constexpr double kStorageBackwardRelTol = 8e-3;

struct Geometry {
  int64_t batch, t, heads, dim;
  bool bf16 = false;
  std::string Name() const {
    return absl::StrCat("batch ", batch, " t ", t, " heads ", heads, " head_dim ", dim,
                        bf16 ? " bf16" : " f32");
  }
  int64_t width() const { return heads * dim; }
  float scale() const { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim))); }
  FusedAttentionArgs Args() const {
    return {.batch = batch,
            .t = t,
            .heads = heads,
            .head_dim = dim,
            .scale = scale(),
            .precision = bf16 ? ProductPrecision::kBF16 : ProductPrecision::kF32};
  }
};

// Naive causal softmax attention in double, with the full [t, t] probabilities of each
// (sample, head).
struct Oracle {
  std::vector<double> out;        // [batch, t, width]
  std::vector<double> logsumexp;  // [batch, heads, t]
  std::vector<double> dqkv;       // [batch, t, 3 width]
};

Oracle AttentionOracle(const Geometry& g, const std::vector<float>& qkv_in,
                       const std::vector<float>& dout_in) {
  const int64_t width = g.width(), ld = 3 * width;
  auto operand = [&](float x) { return static_cast<double>(g.bf16 ? RoundToBf16(x) : x); };
  Oracle o{.out = std::vector<double>(g.batch * g.t * width),
           .logsumexp = std::vector<double>(g.batch * g.heads * g.t),
           .dqkv = std::vector<double>(g.batch * g.t * ld, 0.0)};
  std::vector<double> p(g.t * g.t), ds(g.t * g.t);
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t h = 0; h < g.heads; ++h) {
      auto qkv = [&](int64_t i, int64_t part, int64_t d) {
        return operand(qkv_in[(b * g.t + i) * ld + part * width + h * g.dim + d]);
      };
      auto dout = [&](int64_t i, int64_t d) {
        return operand(dout_in[(b * g.t + i) * width + h * g.dim + d]);
      };
      for (int64_t i = 0; i < g.t; ++i) {
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0.0;
          for (int64_t d = 0; d < g.dim; ++d) s += qkv(i, 0, d) * qkv(j, 1, d);
          p[i * g.t + j] = g.scale() * s;
          max = std::max(max, p[i * g.t + j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(p[i * g.t + j] - max);
        o.logsumexp[(b * g.heads + h) * g.t + i] = max + std::log(sum);
        for (int64_t j = 0; j <= i; ++j) p[i * g.t + j] = std::exp(p[i * g.t + j] - max) / sum;
        for (int64_t d = 0; d < g.dim; ++d) {
          double acc = 0.0;
          for (int64_t j = 0; j <= i; ++j) acc += p[i * g.t + j] * qkv(j, 2, d);
          o.out[(b * g.t + i) * width + h * g.dim + d] = acc;
        }
        // dS = scale * P * (dP - rowsum(dP * P)), dP = dO v^T.
        double dot = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          double dp = 0.0;
          for (int64_t d = 0; d < g.dim; ++d) dp += dout(i, d) * qkv(j, 2, d);
          ds[i * g.t + j] = dp;
          dot += dp * p[i * g.t + j];
        }
        for (int64_t j = 0; j <= i; ++j) {
          ds[i * g.t + j] = g.scale() * p[i * g.t + j] * (ds[i * g.t + j] - dot);
        }
      }
      for (int64_t i = 0; i < g.t; ++i) {
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t d = 0; d < g.dim; ++d) {
            const int64_t at_i = (b * g.t + i) * ld + h * g.dim + d;
            const int64_t at_j = (b * g.t + j) * ld + h * g.dim + d;
            o.dqkv[at_i] += ds[i * g.t + j] * qkv(j, 1, d);           // dq = dS k
            o.dqkv[at_j + width] += ds[i * g.t + j] * qkv(i, 0, d);   // dk = dS^T q
            o.dqkv[at_j + 2 * width] += p[i * g.t + j] * dout(i, d);  // dv = P^T dO
          }
        }
      }
    }
  }
  return o;
}

std::vector<float> ToFloat(const std::vector<double>& values) {
  return std::vector<float>(values.begin(), values.end());
}

double MaxDifference(const std::vector<float>& a, const std::vector<double>& b) {
  double max = 0.0;
  for (size_t i = 0; i < a.size(); ++i) max = std::max(max, std::fabs(a[i] - b[i]));
  return max;
}

class FusedAttentionOpsTest : public OpsConformanceTest {
 protected:
  // q and k in [-qk_range, qk_range], v and dO in [-1, 1].
  void CheckAgainstOracle(const Geometry& g, float qk_range) {
    SCOPED_TRACE(g.Name());
    const int64_t width = g.width();
    std::vector<float> qkv = TestValues(31, g.batch * g.t * 3 * width);
    for (int64_t r = 0; r < g.batch * g.t; ++r) {
      for (int64_t c = 0; c < 2 * width; ++c) qkv[r * 3 * width + c] *= qk_range;
    }
    const std::vector<float> dout = TestValues(32, g.batch * g.t * width);
    const Oracle expected = AttentionOracle(g, qkv, dout);
    const Tensor qkv_t = Upload(qkv, Shape{g.batch, g.t, 3 * width});
    // Outputs start as garbage: the ops overwrite every element.
    Tensor out = Upload(TestValues(33, g.batch * g.t * width), Shape{g.batch, g.t, width});
    Tensor lse = Upload(TestValues(34, g.batch * g.heads * g.t), Shape{g.batch, g.heads, g.t});
    ASSERT_TRUE(ops().attention.FusedCausalForward(g.Args(), qkv_t, out, lse).ok());
    const std::vector<float> out_values = Download(out);
    const double forward_rel = g.bf16 ? kBf16ForwardRelTol : kForwardRelTol;
    const double forward_abs = g.bf16 ? kBf16ForwardAbsTol : kForwardAbsTol;
    ExpectNear(out_values, expected.out, forward_rel, forward_abs, "O");
    ExpectNear(Download(lse), expected.logsumexp, forward_rel, forward_abs, "logsumexp");

    // Backward from the oracle's O and log-sum-exp, so that it is checked on its own.
    const Tensor out_exact = Upload(ToFloat(expected.out), Shape{g.batch, g.t, width});
    const Tensor lse_exact = Upload(ToFloat(expected.logsumexp), Shape{g.batch, g.heads, g.t});
    const Tensor dout_t = Upload(dout, Shape{g.batch, g.t, width});
    Tensor dqkv = Upload(TestValues(35, g.batch * g.t * 3 * width), Shape{g.batch, g.t, 3 * width});
    ASSERT_TRUE(
        ops()
            .attention.FusedCausalBackward(g.Args(), qkv_t, out_exact, lse_exact, dout_t, dqkv)
            .ok());
    const std::vector<float> dqkv_values = Download(dqkv);
    ExpectNear(dqkv_values, expected.dqkv, g.bf16 ? kBf16BackwardRelTol : kBackwardRelTol,
               g.bf16 ? kBf16BackwardAbsTol : kBackwardAbsTol, "dqkv");

    if (g.bf16) {
      // The products' inputs were rounded: the results sit measurably nearer the oracle on
      // rounded operands than the one on unrounded operands.
      Geometry unrounded = g;
      unrounded.bf16 = false;
      const Oracle f32 = AttentionOracle(unrounded, qkv, dout);
      EXPECT_GT(MaxDifference(out_values, f32.out), 2 * MaxDifference(out_values, expected.out));
      EXPECT_GT(MaxDifference(dqkv_values, f32.dqkv),
                2 * MaxDifference(dqkv_values, expected.dqkv));
    }
  }
};

// t = 1030 runs past the CUDA products' 512-row causal blocks, into a partial third one.
TEST_P(FusedAttentionOpsTest, MatchesNaiveAttentionInF32) {
  for (const Geometry& g : {Geometry{2, 1, 3, 4}, Geometry{2, 37, 3, 8}, Geometry{1, 131, 2, 5},
                            Geometry{2, 1030, 2, 4}}) {
    CheckAgainstOracle(g, 1.0f);
  }
}

// q and k up to 3 in magnitude, so that rounding them to bf16 moves the scores visibly.
TEST_P(FusedAttentionOpsTest, MatchesNaiveAttentionOnBf16RoundedOperands) {
  for (const Geometry& g :
       {Geometry{1, 1, 2, 4, true}, Geometry{2, 45, 2, 8, true}, Geometry{1, 131, 1, 8, true}}) {
    CheckAgainstOracle(g, 3.0f);
  }
}

// Mixed precision's storage at the head sizes models use: bf16 qkv, O, dO and dqkv against the
// oracle on the rounded operands, and the same bits run to run. On cuda_fused these calls run on
// cuDNN (runtime.cuda.cudnn_attention), elsewhere on the backend's kernels.
TEST_P(FusedAttentionOpsTest, Bf16StorageMatchesNaiveAttention) {
  for (const Geometry& g : {Geometry{1, 1, 2, 64, true}, Geometry{2, 77, 2, 64, true},
                            Geometry{1, 300, 1, 128, true}}) {
    SCOPED_TRACE(g.Name());
    const int64_t width = g.width();
    const Shape qkv_shape{g.batch, g.t, 3 * width}, out_shape{g.batch, g.t, width};
    // q and k in [-0.5, 0.5]: at head_dim 128 the scores stay within a few units.
    std::vector<float> qkv = TestValues(61, qkv_shape.num_elements());
    for (int64_t r = 0; r < g.batch * g.t; ++r) {
      for (int64_t c = 0; c < 2 * width; ++c) qkv[r * 3 * width + c] *= 0.5f;
    }
    const std::vector<float> dout = TestValues(62, out_shape.num_elements());
    const Oracle expected = AttentionOracle(g, qkv, dout);
    const Tensor qkv16 = Bf16Values(qkv, DType::kBF16, qkv_shape);
    const Tensor dout16 = Bf16Values(dout, DType::kBF16, out_shape);
    auto run = [&](std::vector<float>& out_values, std::vector<float>& lse_values,
                   std::vector<float>& dqkv_values) {
      Tensor out = Uninitialized(out_shape, DType::kBF16);
      Tensor lse = Uninitialized(Shape{g.batch, g.heads, g.t});
      Tensor dqkv = Uninitialized(qkv_shape, DType::kBF16);
      ASSERT_TRUE(ops().attention.FusedCausalForward(g.Args(), qkv16, out, lse).ok());
      ASSERT_TRUE(
          ops().attention.FusedCausalBackward(g.Args(), qkv16, out, lse, dout16, dqkv).ok());
      out_values = ValuesOf(out, false);
      lse_values = Download(lse);
      dqkv_values = ValuesOf(dqkv, false);
    };
    std::vector<float> out, lse, dqkv;
    run(out, lse, dqkv);
    ExpectNear(out, expected.out, kStorageForwardRelTol, kStorageForwardAbsTol, "O");
    ExpectNear(lse, expected.logsumexp, kBf16ForwardRelTol, kBf16ForwardAbsTol, "logsumexp");
    ExpectNear(dqkv, expected.dqkv, kStorageBackwardRelTol, kStorageBackwardAbsTol, "dqkv");
    std::vector<float> out2, lse2, dqkv2;
    run(out2, lse2, dqkv2);
    EXPECT_EQ(out, out2);
    EXPECT_EQ(lse, lse2);
    EXPECT_EQ(dqkv, dqkv2);
  }
}

// The same bits run to run and whether the samples come as one batch or one at a time (as a
// pipeline's micro-batches would): each (sample, head) pair is computed on its own. At t = 1024
// with 64 heads a sample's scores take 256 MiB, so the CUDA products run the batch in chunks
// (two samples, then one, in forward; one at a time in backward).
TEST_P(FusedAttentionOpsTest, ResultsAreTheSameBitsWhateverTheBatchSplit) {
  for (const Geometry& g : {Geometry{3, 70, 2, 4}, Geometry{3, 1024, 64, 2}}) {
    SCOPED_TRACE(g.Name());
    const int64_t width = g.width(), ld = 3 * width;
    const std::vector<float> qkv = TestValues(41, g.batch * g.t * ld, -2.0f, 2.0f);
    const std::vector<float> dout = TestValues(42, g.batch * g.t * width);
    struct Result {
      std::vector<float> out, lse, dqkv;
    };
    auto run = [&](int64_t first, int64_t count) {
      Geometry part = g;
      part.batch = count;
      const Tensor qkv_t = Upload(std::vector<float>(qkv.begin() + first * g.t * ld,
                                                     qkv.begin() + (first + count) * g.t * ld),
                                  Shape{count, g.t, ld});
      const Tensor dout_t = Upload(std::vector<float>(dout.begin() + first * g.t * width,
                                                      dout.begin() + (first + count) * g.t * width),
                                   Shape{count, g.t, width});
      Tensor out = Zeros(Shape{count, g.t, width});
      Tensor lse = Zeros(Shape{count, g.heads, g.t});
      Tensor dqkv = Zeros(Shape{count, g.t, ld});
      EXPECT_TRUE(ops().attention.FusedCausalForward(part.Args(), qkv_t, out, lse).ok());
      EXPECT_TRUE(
          ops().attention.FusedCausalBackward(part.Args(), qkv_t, out, lse, dout_t, dqkv).ok());
      return Result{Download(out), Download(lse), Download(dqkv)};
    };
    const Result whole = run(0, g.batch);
    const Result again = run(0, g.batch);
    EXPECT_EQ(whole.out, again.out);
    EXPECT_EQ(whole.lse, again.lse);
    EXPECT_EQ(whole.dqkv, again.dqkv);
    Result split;
    for (int64_t b = 0; b < g.batch; ++b) {
      const Result one = run(b, 1);
      split.out.insert(split.out.end(), one.out.begin(), one.out.end());
      split.lse.insert(split.lse.end(), one.lse.begin(), one.lse.end());
      split.dqkv.insert(split.dqkv.end(), one.dqkv.begin(), one.dqkv.end());
    }
    EXPECT_EQ(whole.out, split.out);
    EXPECT_EQ(whole.lse, split.lse);
    EXPECT_EQ(whole.dqkv, split.dqkv);
  }
}

// Mixed precision's storage: at kBF16, bf16 qkv, out, dout and dqkv give the bits of the f32
// call on their exact widenings, a bf16 output holding the f32 call's result rounded to nearest
// even, in every mix of the dtypes. Where the all-bf16 calls run on cuDNN
// (!bf16_attention_rounds_f32) those two agree to bf16 rounding: a few bf16 ulps of O, of the
// log-sum-exp's f32 and of the gradients.
TEST_P(FusedAttentionOpsTest, Bf16TensorsGiveTheF32CallsBitsRounded) {
  const Geometry g{2, 70, 2, 8, true};
  const int64_t width = g.width();
  const Shape qkv_shape{g.batch, g.t, 3 * width}, out_shape{g.batch, g.t, width};
  const std::vector<float> qkv = TestValues(51, qkv_shape.num_elements(), -2.0f, 2.0f);
  const std::vector<float> dout = TestValues(52, out_shape.num_elements());
  const auto as = [](bool bf16) { return bf16 ? DType::kBF16 : DType::kF32; };

  // The f32 reference on bf16 values.
  const Tensor qkv32 = Bf16Values(qkv, DType::kF32, qkv_shape);
  Tensor out32 = Uninitialized(out_shape);
  Tensor lse32 = Uninitialized(Shape{g.batch, g.heads, g.t});
  ASSERT_TRUE(ops().attention.FusedCausalForward(g.Args(), qkv32, out32, lse32).ok());
  const std::vector<float> lse_values = Download(lse32);
  for (const bool bf16_qkv : {false, true}) {
    for (const bool bf16_out : {false, true}) {
      SCOPED_TRACE(absl::StrCat("forward, qkv ", bf16_qkv ? "bf16" : "f32", ", out ",
                                bf16_out ? "bf16" : "f32"));
      Tensor out = Uninitialized(out_shape, as(bf16_out));
      Tensor lse = Uninitialized(lse32.shape());
      ASSERT_TRUE(
          ops()
              .attention
              .FusedCausalForward(g.Args(), Bf16Values(qkv, as(bf16_qkv), qkv_shape), out, lse)
              .ok());
      if (bf16_qkv && bf16_out && !GetParam().bf16_attention_rounds_f32) {
        const std::vector<float> reference = ValuesOf(out32, true);
        ExpectNear(ValuesOf(out, false), {reference.begin(), reference.end()},
                   kStorageForwardRelTol, kStorageForwardAbsTol, "O on cuDNN");
        ExpectNear(Download(lse), {lse_values.begin(), lse_values.end()}, 1e-5, 1e-5,
                   "logsumexp on cuDNN");
        continue;
      }
      EXPECT_EQ(ValuesOf(out, false), ValuesOf(out32, bf16_out));
      EXPECT_EQ(Download(lse), lse_values);
    }
  }

  // Backward from the rounded O, as bf16 storage keeps it.
  const std::vector<float> out_values = ValuesOf(out32, /*round=*/true);
  Tensor dqkv32 = Uninitialized(qkv_shape);
  ASSERT_TRUE(ops()
                  .attention
                  .FusedCausalBackward(g.Args(), qkv32,
                                       Bf16Values(out_values, DType::kF32, out_shape), lse32,
                                       Bf16Values(dout, DType::kF32, out_shape), dqkv32)
                  .ok());
  for (int mix = 1; mix < 16; ++mix) {
    const bool bf16_qkv = mix & 1, bf16_out = mix & 2, bf16_dout = mix & 4, bf16_dqkv = mix & 8;
    SCOPED_TRACE(absl::StrCat("backward, bf16:", bf16_qkv ? " qkv" : "", bf16_out ? " out" : "",
                              bf16_dout ? " dout" : "", bf16_dqkv ? " dqkv" : ""));
    Tensor dqkv = Uninitialized(qkv_shape, as(bf16_dqkv));
    ASSERT_TRUE(ops()
                    .attention
                    .FusedCausalBackward(g.Args(), Bf16Values(qkv, as(bf16_qkv), qkv_shape),
                                         Bf16Values(out_values, as(bf16_out), out_shape), lse32,
                                         Bf16Values(dout, as(bf16_dout), out_shape), dqkv)
                    .ok());
    if (mix == 15 && !GetParam().bf16_attention_rounds_f32) {
      const std::vector<float> reference = ValuesOf(dqkv32, true);
      ExpectNear(ValuesOf(dqkv, false), {reference.begin(), reference.end()},
                 kStorageBackwardRelTol, kStorageBackwardAbsTol, "dqkv on cuDNN");
      continue;
    }
    EXPECT_EQ(ValuesOf(dqkv, false), ValuesOf(dqkv32, bf16_dqkv));
  }
}

// bf16 tensors are mixed precision's storage: f32 products take none.
TEST_P(FusedAttentionOpsTest, Bf16TensorsNeedBf16Products) {
  const Geometry g{1, 4, 1, 4};  // f32 products
  const Tensor qkv16 = Zeros(Shape{1, 4, 12}, DType::kBF16);
  const Tensor qkv = Zeros(Shape{1, 4, 12});
  Tensor out = Zeros(Shape{1, 4, 4});
  Tensor out16 = Zeros(Shape{1, 4, 4}, DType::kBF16);
  Tensor lse = Zeros(Shape{1, 1, 4});
  Tensor dqkv16 = Zeros(Shape{1, 4, 12}, DType::kBF16);
  const AttentionOps& attention = ops().attention;
  for (const absl::Status& status :
       {attention.FusedCausalForward(g.Args(), qkv16, out, lse),
        attention.FusedCausalForward(g.Args(), qkv, out16, lse),
        attention.FusedCausalBackward(g.Args(), qkv, out, lse, out16, dqkv16)}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("must be f32 ["), std::string::npos) << status;
  }
}

TEST_P(FusedAttentionOpsTest, EmptyBatchOrPositionsDoNothing) {
  for (const Geometry& g : {Geometry{0, 5, 2, 4}, Geometry{3, 0, 2, 4}}) {
    SCOPED_TRACE(g.Name());
    const Tensor qkv = Zeros(Shape{g.batch, g.t, 3 * g.width()});
    Tensor out = Zeros(Shape{g.batch, g.t, g.width()});
    Tensor lse = Zeros(Shape{g.batch, g.heads, g.t});
    Tensor dqkv = Zeros(Shape{g.batch, g.t, 3 * g.width()});
    EXPECT_TRUE(ops().attention.FusedCausalForward(g.Args(), qkv, out, lse).ok());
    EXPECT_TRUE(ops().attention.FusedCausalBackward(g.Args(), qkv, out, lse, out, dqkv).ok());
  }
}

TEST_P(FusedAttentionOpsTest, MismatchedTensorsAreInvalidArguments) {
  const Geometry g{2, 3, 2, 4};
  const Tensor qkv = Zeros(Shape{2, 3, 24});
  Tensor out = Zeros(Shape{2, 3, 8});
  Tensor lse = Zeros(Shape{2, 2, 3});
  Tensor dqkv = Zeros(Shape{2, 3, 24});
  Tensor short_lse = Zeros(Shape{2, 3});
  const Tensor ids = UploadIds(std::vector<int64_t>(48, 0), Shape{2, 3, 8});
  FusedAttentionArgs no_heads = g.Args();
  no_heads.heads = 0;
  const AttentionOps& attention = ops().attention;
  const std::vector<std::pair<std::string, absl::Status>> results = {
      {"forward, no heads", attention.FusedCausalForward(no_heads, qkv, out, lse)},
      {"forward, out as qkv", attention.FusedCausalForward(g.Args(), out, out, lse)},
      {"forward, short logsumexp", attention.FusedCausalForward(g.Args(), qkv, out, short_lse)},
      {"backward, i64 dout", attention.FusedCausalBackward(g.Args(), qkv, out, lse, ids, dqkv)},
      {"backward, dqkv is qkv", attention.FusedCausalBackward(g.Args(), dqkv, out, lse, out, dqkv)},
  };
  for (const auto& [what, status] : results) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << what << ": " << status;
    EXPECT_NE(status.message().find("AttentionOps::FusedCausal"), std::string::npos)
        << what << ": " << status;
  }
}

GPIPE_INSTANTIATE_ON_EVERY_BACKEND(FusedAttentionOpsTest);

}  // namespace
}  // namespace gpipe::testing
