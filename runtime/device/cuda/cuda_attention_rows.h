// The row kernels of the CUDA fused causal attention (cuda_fused_attention.cu), between its
// cuBLAS products: one thread block per score row of a chunk's [rows / t, t, t] f32 scores.
// Each issues on `stream` and returns the launch status. Same arithmetic as the CPU backend
// (cpu_fused_attention.h): float exponentials, sums in double over a fixed tree (block_reduce.cuh),
// so the same bits every run.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_ATTENTION_ROWS_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_ATTENTION_ROWS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace gpipe::cuda {

// A chunk's score rows: `samples` * heads * t rows of t entries. Each sample's [heads, t, t]
// scores are dense, `sample_stride` floats apart (>= heads * t * t; padding keeps every sample's
// block equally aligned). Row r is position i = r % t of head (r / t) % heads of sample
// r / (heads * t), and sees columns 0..i. The products fill rows in blocks of `row_block` rows,
// each up to its block's last column: row i's entries from min(t, (i / row_block + 1) *
// row_block) on are neither read nor written.
struct ScoreRows {
  int64_t samples = 0;
  int64_t heads = 1;
  int64_t t = 0;
  int64_t sample_stride = 0;
  int64_t row_block = 1;
};

// In place: row i becomes softmax of entries 0..i (shifted by their maximum, sum in double, one
// float reciprocal), its block's entries past i exact zeros; logsumexp[r] = max + log(sum).
// With `probs16` (bf16 bits, laid out as the scores), the softmax goes there instead, each value
// rounded to nearest even (what a bf16 product would make of the f32 one), and `scores` is left
// holding exp(score - max).
absl::Status CausalSoftmaxWithLogSumExp(cudaStream_t stream, const ScoreRows& rows, float* scores,
                                        uint16_t* probs16, float* logsumexp);

// The score rows of the gradient, and where their O and dO live: row (c, h, i) reads out and
// dout at (c * t + i) * width + h * head_dim.
// Device elements an attention row kernel reads: f32, or bf16 (widened exactly).
struct RowsIn {
  const void* data = nullptr;  // the first element
  bool bf16 = false;
};

struct GradientRows {
  ScoreRows scores;
  int64_t head_dim = 1;
  int64_t width = 1;  // heads * head_dim: the row stride of out and dout
  float scale = 1.0f;
  bool bf16 = false;  // dO rounded to bf16 in D, as it enters dP = dO v^T
};

// Given S = scale q k^T in `scores` and dP = dO v^T in `dprobs`, in place on the causal entries
// (exact zeros past them, up to the row's block end): scores becomes P = exp(S - logsumexp) and
// dprobs becomes dS = scale * P * (dP - D), with D_i = rowsum(dO_i * O_i) in double. out, dout: the
// chunk's [samples, t, width] rows, f32 or bf16; logsumexp: the chunk's [samples, heads, t].
// With probs16 and dscores16 (bf16 bits, laid out as the scores; both or neither), P and dS go
// there instead, rounded to nearest even, and scores and dprobs are left as they came.
absl::Status CausalSoftmaxGradient(cudaStream_t stream, const GradientRows& rows, RowsIn out,
                                   RowsIn dout, const float* logsumexp, float* scores,
                                   float* dprobs, uint16_t* probs16, uint16_t* dscores16);

}  // namespace gpipe::cuda

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_ATTENTION_ROWS_H_
