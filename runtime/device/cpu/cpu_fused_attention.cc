#include "runtime/device/cpu/cpu_fused_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "oneapi/dnnl/dnnl.h"
#include "runtime/core/bf16.h"
#include "runtime/core/check.h"

namespace gpipe::cpu {
namespace {

// Elements of an f32 or a bf16 array, read as f32 (a bf16 widens exactly).
struct Elements {
  const void* data = nullptr;
  bool bf16 = false;

  float operator[](int64_t i) const {
    return bf16 ? FromBf16(static_cast<const uint16_t*>(data)[i])
                : static_cast<const float*>(data)[i];
  }
  Elements Plus(int64_t i) const {
    return {.data = bf16 ? static_cast<const void*>(static_cast<const uint16_t*>(data) + i)
                         : static_cast<const void*>(static_cast<const float*>(data) + i),
            .bf16 = bf16};
  }
};

Elements ElementsOf(const Tensor& t) {
  return {.data = t.raw_data(), .bf16 = t.dtype() == DType::kBF16};
}

// One (sample, head) pair: its columns of qkv (rows qkv_ld apart), of out and dout (rows
// out_ld apart) and its logsumexp row.
struct Head {
  int64_t t = 0;
  int64_t dim = 0;
  int64_t qkv_ld = 0;
  int64_t out_ld = 0;
  float scale = 1.0f;
  bool bf16 = false;  // ProductPrecision::kBF16
  Elements q;
  Elements k;
  Elements v;
};

// Floats each scratch array takes: a multiple of 16, so every array starts 64-byte aligned.
constexpr int64_t Span(int64_t floats) { return (floats + 15) / 16 * 16; }

// One thread's scratch, carved from its slice of the caller's: a few tiles, independent of t.
// Nothing is read before this file's code writes it.
struct Workspace {
  Workspace(int64_t dim, float* floats, double* doubles) : sum(doubles) {
    for (float** array : {&q, &dout, &acc}) *array = Take(floats, kQueryTile * dim);
    for (float** array : {&keys, &values, &dkeys, &dvalues}) *array = Take(floats, kKeyTile * dim);
    for (float** array : {&scores, &dprobs}) *array = Take(floats, kQueryTile * kKeyTile);
    for (float** array : {&max, &delta}) *array = Take(floats, kQueryTile);
  }
  static float* Take(float*& next, int64_t floats) {
    float* array = next;
    next += Span(floats);
    return array;
  }
  float *q, *dout, *acc, *keys, *values, *dkeys, *dvalues, *scores, *dprobs, *max, *delta;
  double* sum;  // kScratchDoubles
};

// A product operand: rounded to bf16 under ProductPrecision::kBF16 (product_precision.h).
inline float Operand(float value, bool bf16) { return bf16 ? RoundToBf16(value) : value; }

// dst[r * dim + d] = operand src[r * ld + d] for r < rows.
void PackRows(Elements src, int64_t ld, int64_t rows, int64_t dim, bool bf16, float* dst) {
  if (!src.bf16) {
    const auto* from = static_cast<const float*>(src.data);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t d = 0; d < dim; ++d) dst[r * dim + d] = Operand(from[r * ld + d], bf16);
    }
    return;
  }
  // bf16 values are bf16 operands already.
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t d = 0; d < dim; ++d) dst[r * dim + d] = src[r * ld + d];
  }
}

// C[m, n] = alpha op(A) op(B) + beta C on dense row-major tiles (ld = their column counts),
// with dnnl_sgemm: single-threaded here (ForEachHead's region limits it to its thread), so each
// tile's sums run in one fixed order. Operands already hold
// bf16 values where the precision asks for them (a product of two is exact in f32).
void TileGemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, const float* b, float beta, float* c) {
  const dnnl_status_t status =
      dnnl_sgemm(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n, k, alpha, a,
                 transpose_a ? m : k, b, transpose_b ? k : n, beta, c, n);
  // Sizes are positive and leading dimensions consistent by construction.
  GPIPE_CHECK(status == dnnl_success) << "dnnl_sgemm in the fused attention: " << status;
}

// Keys visible to query `query` inside the key tile [first_key, first_key + cols): 0..cols.
inline int64_t Visible(int64_t query, int64_t first_key, int64_t cols) {
  return std::clamp<int64_t>(query - first_key + 1, 0, cols);
}

// `out` rows: f32, or bf16 rounded to nearest even from the f32 value.
void ForwardHead(const Head& h, void* out, bool bf16_out, float* logsumexp, Workspace& w) {
  const int64_t dim = h.dim;
  for (int64_t i0 = 0; i0 < h.t; i0 += kQueryTile) {
    const int64_t rows = std::min(kQueryTile, h.t - i0);
    PackRows(h.q.Plus(i0 * h.qkv_ld), h.qkv_ld, rows, dim, h.bf16, w.q);
    std::fill_n(w.acc, kQueryTile * dim, 0.0f);
    std::fill_n(w.max, kQueryTile, -std::numeric_limits<float>::infinity());
    std::fill_n(w.sum, kQueryTile, 0.0);
    // Causal: this tile's last query sees keys up to i0 + rows - 1; later key tiles are skipped.
    for (int64_t j0 = 0; j0 < i0 + rows; j0 += kKeyTile) {
      const int64_t cols = std::min(kKeyTile, i0 + rows - j0);
      PackRows(h.k.Plus(j0 * h.qkv_ld), h.qkv_ld, cols, dim, h.bf16, w.keys);
      PackRows(h.v.Plus(j0 * h.qkv_ld), h.qkv_ld, cols, dim, h.bf16, w.values);
      // S = scale q k^T.
      TileGemm(false, true, rows, cols, dim, h.scale, w.q, w.keys, 0.0f, w.scores);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t visible = Visible(i0 + r, j0, cols);
        float* __restrict s = w.scores + r * cols;
        std::fill(s + visible, s + cols, 0.0f);  // masked: no term in P v
        if (visible == 0) continue;
        const float max = std::max(w.max[r], *std::max_element(s, s + visible));
        // exp(-inf) = 0 on the row's first tile; exactly 1 while the maximum holds.
        const float rescale = std::exp(w.max[r] - max);
        double sum = 0.0;
        for (int64_t c = 0; c < visible; ++c) {
          const float p = std::exp(s[c] - max);
          sum += p;
          s[c] = Operand(p, h.bf16);
        }
        w.sum[r] = w.sum[r] * rescale + sum;
        w.max[r] = max;
        float* __restrict acc = w.acc + r * dim;
        for (int64_t d = 0; d < dim; ++d) acc[d] *= rescale;
      }
      // acc += P v.
      TileGemm(false, false, rows, dim, cols, 1.0f, w.scores, w.values, 1.0f, w.acc);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t at = (i0 + r) * h.out_ld;
      const float* acc = w.acc + r * dim;
      if (bf16_out) {
        uint16_t* __restrict row = static_cast<uint16_t*>(out) + at;
        for (int64_t d = 0; d < dim; ++d) row[d] = ToBf16(static_cast<float>(acc[d] / w.sum[r]));
      } else {
        float* __restrict row = static_cast<float*>(out) + at;
        for (int64_t d = 0; d < dim; ++d) row[d] = static_cast<float>(acc[d] / w.sum[r]);
      }
      logsumexp[i0 + r] = static_cast<float>(w.max[r] + std::log(w.sum[r]));
    }
  }
}

// One key tile [j0, j0 + cols) against one query tile [i0, i0 + rows): adds its terms to the
// key tile's dk and dv accumulators and to dq's rows.
void BackwardTile(const Head& h, Elements out, const float* logsumexp, Elements dout, int64_t i0,
                  int64_t rows, int64_t j0, int64_t cols, float* dq, Workspace& w) {
  const int64_t dim = h.dim;
  PackRows(h.q.Plus(i0 * h.qkv_ld), h.qkv_ld, rows, dim, h.bf16, w.q);
  PackRows(dout.Plus(i0 * h.out_ld), h.out_ld, rows, dim, h.bf16, w.dout);
  for (int64_t r = 0; r < rows; ++r) {
    // D = rowsum(dO * O) = rowsum(dP * P), with dO as it enters dP, summed in double.
    const Elements o_row = out.Plus((i0 + r) * h.out_ld);
    const float* do_row = w.dout + r * dim;
    double dot = 0.0;
    for (int64_t d = 0; d < dim; ++d) dot += static_cast<double>(do_row[d]) * o_row[d];
    w.delta[r] = static_cast<float>(dot);
  }
  // S = scale q k^T, dP = dO v^T.
  TileGemm(false, true, rows, cols, dim, h.scale, w.q, w.keys, 0.0f, w.scores);
  TileGemm(false, true, rows, cols, dim, 1.0f, w.dout, w.values, 0.0f, w.dprobs);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t visible = Visible(i0 + r, j0, cols);
    float* __restrict p = w.scores + r * cols;
    float* __restrict ds = w.dprobs + r * cols;
    const float lse = logsumexp[i0 + r];
    for (int64_t c = 0; c < visible; ++c) {
      const float prob = std::exp(p[c] - lse);
      ds[c] = Operand(h.scale * prob * (ds[c] - w.delta[r]), h.bf16);
      p[c] = Operand(prob, h.bf16);
    }
    std::fill(p + visible, p + cols, 0.0f);
    std::fill(ds + visible, ds + cols, 0.0f);
  }
  // dv += P^T dO, dk += dS^T q.
  TileGemm(true, false, cols, dim, rows, 1.0f, w.scores, w.dout, 1.0f, w.dvalues);
  TileGemm(true, false, cols, dim, rows, 1.0f, w.dprobs, w.q, 1.0f, w.dkeys);
  // dq's rows += dS k (the tile's sum first, then added: a fixed order per row).
  TileGemm(false, false, rows, dim, cols, 1.0f, w.dprobs, w.keys, 0.0f, w.acc);
  for (int64_t r = 0; r < rows; ++r) {
    float* __restrict dq_row = dq + (i0 + r) * h.qkv_ld;
    const float* __restrict tile_row = w.acc + r * dim;
    for (int64_t d = 0; d < dim; ++d) dq_row[d] += tile_row[d];
  }
}

void BackwardHead(const Head& h, Elements out, const float* logsumexp, Elements dout, float* dq,
                  float* dk, float* dv, Workspace& w) {
  const int64_t dim = h.dim;
  for (int64_t i = 0; i < h.t; ++i) std::fill(dq + i * h.qkv_ld, dq + i * h.qkv_ld + dim, 0.0f);
  for (int64_t j0 = 0; j0 < h.t; j0 += kKeyTile) {
    const int64_t cols = std::min(kKeyTile, h.t - j0);
    PackRows(h.k.Plus(j0 * h.qkv_ld), h.qkv_ld, cols, dim, h.bf16, w.keys);
    PackRows(h.v.Plus(j0 * h.qkv_ld), h.qkv_ld, cols, dim, h.bf16, w.values);
    std::fill_n(w.dkeys, kKeyTile * dim, 0.0f);
    std::fill_n(w.dvalues, kKeyTile * dim, 0.0f);
    // Causal: query tiles wholly before the key tile see none of it.
    for (int64_t i0 = j0 / kQueryTile * kQueryTile; i0 < h.t; i0 += kQueryTile) {
      BackwardTile(h, out, logsumexp, dout, i0, std::min(kQueryTile, h.t - i0), j0, cols, dq, w);
    }
    for (int64_t c = 0; c < cols; ++c) {
      std::copy_n(w.dkeys + c * dim, dim, dk + (j0 + c) * h.qkv_ld);
      std::copy_n(w.dvalues + c * dim, dim, dv + (j0 + c) * h.qkv_ld);
    }
  }
}

// Runs per_head(sample, head, head view, workspace) for every pair, `threads` at a time, each
// pair whole on one thread with its own slice of `scratch`. The region opens even for one
// thread or one pair, so TileGemm always runs single-threaded and the bits never depend on the
// thread count or the batch.
template <typename PerHead>
void ForEachHead(const FusedAttentionArgs& args, int threads, const Scratch& scratch, Elements qkv,
                 PerHead per_head) {
  const int64_t width = args.heads * args.head_dim;
  const int64_t pairs = args.batch * args.heads;
#pragma omp parallel num_threads(threads)
  {
    // This region's own setting (each implicit task has its own copy): TileGemm's sgemm calls
    // stay on their thread, whatever the process-wide OpenMP thread count.
    omp_set_num_threads(1);
    const int thread = omp_get_thread_num();
    Workspace workspace(args.head_dim, scratch.floats + thread * ScratchFloats(args.head_dim),
                        scratch.doubles + thread * kScratchDoubles);
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t b = pair / args.heads, hd = pair % args.heads;
      const Elements q = qkv.Plus(b * args.t * 3 * width + hd * args.head_dim);
      const Head head{.t = args.t,
                      .dim = args.head_dim,
                      .qkv_ld = 3 * width,
                      .out_ld = width,
                      .scale = args.scale,
                      .bf16 = args.precision == ProductPrecision::kBF16,
                      .q = q,
                      .k = q.Plus(width),
                      .v = q.Plus(2 * width)};
      per_head(b, hd, head, workspace);
    }
  }
}

}  // namespace

int64_t ScratchFloats(int64_t head_dim) {
  return 3 * Span(kQueryTile * head_dim) + 4 * Span(kKeyTile * head_dim) +
         2 * Span(kQueryTile * kKeyTile) + 2 * Span(kQueryTile);
}

void FusedCausalForward(const FusedAttentionArgs& args, int threads, const Scratch& scratch,
                        const Tensor& qkv, Tensor& out, float* logsumexp) {
  const int64_t width = args.heads * args.head_dim;
  const bool bf16_out = out.dtype() == DType::kBF16;
  const int64_t out_bytes = SizeOf(out.dtype());
  ForEachHead(args, threads, scratch, ElementsOf(qkv),
              [&](int64_t b, int64_t hd, const Head& head, Workspace& workspace) {
                ForwardHead(head,
                            static_cast<char*>(out.raw_data()) +
                                (b * args.t * width + hd * args.head_dim) * out_bytes,
                            bf16_out, logsumexp + (b * args.heads + hd) * args.t, workspace);
              });
}

void FusedCausalBackward(const FusedAttentionArgs& args, int threads, const Scratch& scratch,
                         const Tensor& qkv, const Tensor& out, const float* logsumexp,
                         const Tensor& dout, float* dqkv) {
  const int64_t width = args.heads * args.head_dim;
  ForEachHead(args, threads, scratch, ElementsOf(qkv),
              [&](int64_t b, int64_t hd, const Head& head, Workspace& workspace) {
                const int64_t out_offset = b * args.t * width + hd * args.head_dim;
                float* dq = dqkv + b * args.t * 3 * width + hd * args.head_dim;
                BackwardHead(head, ElementsOf(out).Plus(out_offset),
                             logsumexp + (b * args.heads + hd) * args.t,
                             ElementsOf(dout).Plus(out_offset), dq, dq + width, dq + 2 * width,
                             workspace);
              });
}

}  // namespace gpipe::cpu
