#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "runtime/device/cuda/block_reduce.cuh"
#include "runtime/device/cuda/cuda_attention_rows.h"
#include "runtime/device/cuda/kernel_launch.h"

namespace gpipe::cuda {
namespace {

constexpr int kRowThreads = 256;

// Where row r of the chunk starts in its scores.
__device__ inline int64_t RowOffset(const ScoreRows& g, int64_t r) {
  const int64_t per_sample = g.heads * g.t;
  return (r / per_sample) * g.sample_stride + (r % per_sample) * g.t;
}

// One past row i's last filled entry.
__device__ inline int64_t RowEnd(const ScoreRows& g, int64_t i) {
  const int64_t end = (i / g.row_block + 1) * g.row_block;
  return end < g.t ? end : g.t;
}

// Blocks loop over the rows (row r, r + gridDim.x, ...): one grid for any row count.
unsigned RowBlocks(const ScoreRows& g) {
  constexpr int64_t kMaxBlocks = int64_t{1} << 30;
  return static_cast<unsigned>(std::clamp<int64_t>(g.samples * g.heads * g.t, 1, kMaxBlocks));
}

// bf16 bits of `value`, rounded to nearest even (as MatmulOps packs product operands).
__device__ inline uint16_t RoundedBits(float value) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(value));
}

__global__ void SoftmaxWithLogSumExpKernel(ScoreRows g, float* scores, uint16_t* probs16,
                                           float* logsumexp) {
  __shared__ float max_scratch[32];
  __shared__ double sum_scratch[32];
  const int64_t rows = g.samples * g.heads * g.t;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* row = scores + RowOffset(g, r);
    const int64_t len = r % g.t + 1;  // position i sees columns 0..i
    const int64_t end = RowEnd(g, len - 1);
    float max = -INFINITY;
    for (int64_t s = threadIdx.x; s < len; s += blockDim.x) max = MaxOp()(max, row[s]);
    max = BlockReduce(max, MaxOp(), max_scratch);
    double sum = 0.0;
    for (int64_t s = threadIdx.x; s < len; s += blockDim.x) {
      const float e = expf(row[s] - max);
      row[s] = e;
      sum += e;
    }
    sum = BlockReduce(sum, SumOp(), sum_scratch);
    const float inv_sum = static_cast<float>(1.0 / sum);
    if (probs16 != nullptr) {
      uint16_t* row16 = probs16 + RowOffset(g, r);
      for (int64_t s = threadIdx.x; s < end; s += blockDim.x) {
        row16[s] = s < len ? RoundedBits(row[s] * inv_sum) : uint16_t{0};
      }
    } else {
      for (int64_t s = threadIdx.x; s < end; s += blockDim.x) {
        row[s] = s < len ? row[s] * inv_sum : 0.0f;
      }
    }
    if (threadIdx.x == 0) logsumexp[r] = static_cast<float>(max + log(sum));
  }
}

__device__ inline float Load(RowsIn in, int64_t i) {
  return in.bf16 ? __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(in.data)[i])
                                   << 16)
                 : static_cast<const float*>(in.data)[i];
}

__global__ void SoftmaxGradientKernel(GradientRows g, RowsIn out, RowsIn dout,
                                      const float* logsumexp, float* scores, float* dprobs,
                                      uint16_t* probs16, uint16_t* dscores16) {
  __shared__ double dot_scratch[32];
  const ScoreRows& s = g.scores;
  const int64_t rows = s.samples * s.heads * s.t;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t i = r % s.t;
    const int64_t head = (r / s.t) % s.heads;
    const int64_t sample = r / (s.heads * s.t);
    const int64_t at = (sample * s.t + i) * g.width + head * g.head_dim;
    // D = rowsum(dO * O), with dO as it enters dP (rounded under bf16).
    double dot = 0.0;
    for (int64_t d = threadIdx.x; d < g.head_dim; d += blockDim.x) {
      const float raw = Load(dout, at + d);
      const float d_o = g.bf16 ? __bfloat162float(__float2bfloat16_rn(raw)) : raw;
      dot += static_cast<double>(d_o) * Load(out, at + d);
    }
    const float delta = static_cast<float>(BlockReduce(dot, SumOp(), dot_scratch));
    const float lse = logsumexp[r];
    const int64_t end = RowEnd(s, i);
    float* p = scores + RowOffset(s, r);
    float* ds = dprobs + RowOffset(s, r);
    if (probs16 != nullptr) {
      uint16_t* p16 = probs16 + RowOffset(s, r);
      uint16_t* ds16 = dscores16 + RowOffset(s, r);
      for (int64_t c = threadIdx.x; c < end; c += blockDim.x) {
        if (c <= i) {
          const float prob = expf(p[c] - lse);
          ds16[c] = RoundedBits(g.scale * prob * (ds[c] - delta));
          p16[c] = RoundedBits(prob);
        } else {
          ds16[c] = 0;
          p16[c] = 0;
        }
      }
      continue;
    }
    for (int64_t c = threadIdx.x; c < end; c += blockDim.x) {
      if (c <= i) {
        const float prob = expf(p[c] - lse);
        ds[c] = g.scale * prob * (ds[c] - delta);
        p[c] = prob;
      } else {
        ds[c] = 0.0f;
        p[c] = 0.0f;
      }
    }
  }
}

}  // namespace

absl::Status CausalSoftmaxWithLogSumExp(cudaStream_t stream, const ScoreRows& rows, float* scores,
                                        uint16_t* probs16, float* logsumexp) {
  SoftmaxWithLogSumExpKernel<<<RowBlocks(rows), kRowThreads, 0, stream>>>(rows, scores, probs16,
                                                                          logsumexp);
  return LaunchStatus("fused causal attention: softmax and log-sum-exp");
}

absl::Status CausalSoftmaxGradient(cudaStream_t stream, const GradientRows& rows, RowsIn out,
                                   RowsIn dout, const float* logsumexp, float* scores,
                                   float* dprobs, uint16_t* probs16, uint16_t* dscores16) {
  SoftmaxGradientKernel<<<RowBlocks(rows.scores), kRowThreads, 0, stream>>>(
      rows, out, dout, logsumexp, scores, dprobs, probs16, dscores16);
  return LaunchStatus("fused causal attention: softmax gradient");
}

}  // namespace gpipe::cuda
