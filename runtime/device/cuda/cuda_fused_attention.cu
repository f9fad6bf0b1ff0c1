// CudaAttentionOps' fused causal attention (contracts in runtime/device/ops/attention_ops.h):
// straightforward tiled kernels, FlashAttention-2's algorithm without its tensor-core tiling.
// A block is one warp; each thread owns one row (a query, or a key in the dk/dv pass) and walks
// the tiles of the other side staged in shared memory, so every sum runs in a fixed order in one
// thread: no atomics, the same bits every run. The backward runs two passes: dk and dv per key
// row (over the query rows at and after it), then dq per query row (over the keys up to it);
// both rebuild P = exp(score - logsumexp). Accumulators live in the output rows each thread owns.
// The arithmetic follows the CPU backend's (cpu_fused_attention.h): f32 products, the running
// denominator and D = rowsum(dO * O) in double, bf16 operands under ProductPrecision::kBF16.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_attention_ops.h"
#include "runtime/device/cuda/device_pointer.h"
#include "runtime/device/cuda/kernel_launch.h"

namespace gpipe {
namespace {

constexpr int kRows = 32;                    // rows per block, one thread each
constexpr int64_t kStagedBytes = 44 * 1024;  // two staged [tile, dim] f32 tiles at most

struct Geometry {
  int64_t t = 0;
  int64_t heads = 0;
  int64_t dim = 0;
  int64_t width = 0;  // heads * dim
  float scale = 1.0f;
  bool bf16 = false;
  int tile = 1;  // rows per staged tile
};

__device__ inline float Operand(float value, bool bf16) {
  return bf16 ? __bfloat162float(__float2bfloat16_rn(value)) : value;
}

__device__ inline int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

// Keys visible to query `query` (or to nothing when !active) in the key tile [first, first + cols).
__device__ inline int64_t Visible(bool active, int64_t query, int64_t first, int64_t cols) {
  if (!active || query < first) return 0;
  return Min(query - first + 1, cols);
}

// a[r * dim + d] = operand a_src[r * ld + d] and the same for b, for r < rows.
__device__ void Stage(const float* a_src, const float* b_src, int64_t ld, int rows, int64_t dim,
                      bool bf16, float* a, float* b) {
  for (int64_t e = threadIdx.x; e < rows * dim; e += blockDim.x) {
    const int64_t r = e / dim, d = e % dim;
    a[e] = Operand(a_src[r * ld + d], bf16);
    b[e] = Operand(b_src[r * ld + d], bf16);
  }
}

// D = rowsum(dO * O) of one row, with dO as it enters dP (rounded under bf16), in double.
__device__ float Delta(const float* dout_row, const float* out_row, int64_t dim, bool bf16) {
  double dot = 0.0;
  for (int64_t d = 0; d < dim; ++d) {
    dot += static_cast<double>(Operand(dout_row[d], bf16)) * out_row[d];
  }
  return static_cast<float>(dot);
}

// Grid (batch * heads, query tiles of kRows); shared: k and v tiles [tile, dim], p [kRows, tile].
__global__ void FusedForwardKernel(Geometry g, const float* qkv, float* out, float* logsumexp) {
  extern __shared__ float shared[];
  float* keys = shared;
  float* values = keys + g.tile * g.dim;
  float* probs = values + g.tile * g.dim + threadIdx.x * g.tile;
  const int64_t pair = blockIdx.x, b = pair / g.heads, h = pair % g.heads;
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kRows, i = i0 + threadIdx.x;
  const bool active = i < g.t;
  const int64_t ld = 3 * g.width;
  const float* head = qkv + b * g.t * ld + h * g.dim;  // row 0's queries of this head
  const float* q = head + i * ld;
  float* o = out + (b * g.t + i) * g.width + h * g.dim;
  if (active) {
    for (int64_t d = 0; d < g.dim; ++d) o[d] = 0.0f;
  }
  float row_max = -INFINITY;
  double sum = 0.0;
  const int64_t key_end = Min(g.t, i0 + kRows);
  for (int64_t j0 = 0; j0 < key_end; j0 += g.tile) {
    const int cols = static_cast<int>(Min(g.tile, key_end - j0));
    __syncthreads();  // the previous tile is no longer read
    Stage(head + j0 * ld + g.width, head + j0 * ld + 2 * g.width, ld, cols, g.dim, g.bf16, keys,
          values);
    __syncthreads();
    const int64_t visible = Visible(active, i, j0, cols);
    if (visible == 0) continue;
    float tile_max = -INFINITY;
    for (int64_t c = 0; c < visible; ++c) {
      float s = 0.0f;
      for (int64_t d = 0; d < g.dim; ++d) s += Operand(q[d], g.bf16) * keys[c * g.dim + d];
      probs[c] = g.scale * s;
      tile_max = fmaxf(tile_max, probs[c]);
    }
    const float new_max = fmaxf(row_max, tile_max);
    const float rescale = expf(row_max - new_max);
    double tile_sum = 0.0;
    for (int64_t c = 0; c < visible; ++c) {
      const float p = expf(probs[c] - new_max);
      tile_sum += p;
      probs[c] = Operand(p, g.bf16);
    }
    sum = sum * rescale + tile_sum;
    row_max = new_max;
    for (int64_t d = 0; d < g.dim; ++d) {
      float acc = o[d] * rescale;
      for (int64_t c = 0; c < visible; ++c) acc += probs[c] * values[c * g.dim + d];
      o[d] = acc;
    }
  }
  if (!active) return;
  for (int64_t d = 0; d < g.dim; ++d) o[d] = static_cast<float>(o[d] / sum);
  logsumexp[pair * g.t + i] = static_cast<float>(row_max + log(sum));
}

// dk and dv. Grid (batch * heads, key tiles of kRows); thread c owns key j. Shared: q and dO
// tiles [tile, dim], then lse and D [tile].
__global__ void FusedBackwardKeysKernel(Geometry g, const float* qkv, const float* out,
                                        const float* logsumexp, const float* dout, float* dqkv) {
  extern __shared__ float shared[];
  float* queries = shared;
  float* douts = queries + g.tile * g.dim;
  float* lses = douts + g.tile * g.dim;
  float* deltas = lses + g.tile;
  const int64_t pair = blockIdx.x, b = pair / g.heads, h = pair % g.heads;
  const int64_t j0 = static_cast<int64_t>(blockIdx.y) * kRows, j = j0 + threadIdx.x;
  const bool active = j < g.t;
  const int64_t ld = 3 * g.width;
  const float* head = qkv + b * g.t * ld + h * g.dim;
  const float* k = head + j * ld + g.width;
  const float* v = head + j * ld + 2 * g.width;
  const float* out_head = out + b * g.t * g.width + h * g.dim;
  const float* dout_head = dout + b * g.t * g.width + h * g.dim;
  float* dk = dqkv + b * g.t * ld + h * g.dim + j * ld + g.width;
  float* dv = dk + g.width;
  if (active) {
    for (int64_t d = 0; d < g.dim; ++d) dk[d] = dv[d] = 0.0f;
  }
  for (int64_t i0 = j0; i0 < g.t; i0 += g.tile) {
    const int rows = static_cast<int>(Min(g.tile, g.t - i0));
    __syncthreads();
    for (int64_t e = threadIdx.x; e < rows * g.dim; e += blockDim.x) {
      const int64_t r = e / g.dim, d = e % g.dim;
      queries[e] = Operand(head[(i0 + r) * ld + d], g.bf16);
      douts[e] = Operand(dout_head[(i0 + r) * g.width + d], g.bf16);
    }
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
      lses[r] = logsumexp[pair * g.t + i0 + r];
      deltas[r] =
          Delta(dout_head + (i0 + r) * g.width, out_head + (i0 + r) * g.width, g.dim, g.bf16);
    }
    __syncthreads();
    if (!active) continue;
    for (int r = 0; r < rows; ++r) {
      if (i0 + r < j) continue;  // causal: query i sees key j only when j <= i
      float s = 0.0f, dp = 0.0f;
      for (int64_t d = 0; d < g.dim; ++d) {
        s += queries[r * g.dim + d] * Operand(k[d], g.bf16);
        dp += douts[r * g.dim + d] * Operand(v[d], g.bf16);
      }
      const float p = expf(g.scale * s - lses[r]);
      const float ds = Operand(g.scale * p * (dp - deltas[r]), g.bf16);
      const float p_operand = Operand(p, g.bf16);
      for (int64_t d = 0; d < g.dim; ++d) {
        dv[d] += p_operand * douts[r * g.dim + d];
        dk[d] += ds * queries[r * g.dim + d];
      }
    }
  }
}

// dq. Grid (batch * heads, query tiles of kRows); thread r owns query i. Shared: k and v tiles.
__global__ void FusedBackwardQueriesKernel(Geometry g, const float* qkv, const float* out,
                                           const float* logsumexp, const float* dout, float* dqkv) {
  extern __shared__ float shared[];
  float* keys = shared;
  float* values = keys + g.tile * g.dim;
  const int64_t pair = blockIdx.x, b = pair / g.heads, h = pair % g.heads;
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kRows, i = i0 + threadIdx.x;
  const bool active = i < g.t;
  const int64_t ld = 3 * g.width;
  const float* head = qkv + b * g.t * ld + h * g.dim;
  const float* q = head + i * ld;
  const float* o = out + (b * g.t + i) * g.width + h * g.dim;
  const float* d_o = dout + (b * g.t + i) * g.width + h * g.dim;
  float* dq = dqkv + b * g.t * ld + h * g.dim + i * ld;
  float lse = 0.0f, delta = 0.0f;
  if (active) {
    for (int64_t d = 0; d < g.dim; ++d) dq[d] = 0.0f;
    lse = logsumexp[pair * g.t + i];
    delta = Delta(d_o, o, g.dim, g.bf16);
  }
  const int64_t key_end = Min(g.t, i0 + kRows);
  for (int64_t j0 = 0; j0 < key_end; j0 += g.tile) {
    const int cols = static_cast<int>(Min(g.tile, key_end - j0));
    __syncthreads();
    Stage(head + j0 * ld + g.width, head + j0 * ld + 2 * g.width, ld, cols, g.dim, g.bf16, keys,
          values);
    __syncthreads();
    const int64_t visible = Visible(active, i, j0, cols);
    for (int64_t c = 0; c < visible; ++c) {
      float s = 0.0f, dp = 0.0f;
      for (int64_t d = 0; d < g.dim; ++d) {
        s += Operand(q[d], g.bf16) * keys[c * g.dim + d];
        dp += Operand(d_o[d], g.bf16) * values[c * g.dim + d];
      }
      const float p = expf(g.scale * s - lse);
      const float ds = Operand(g.scale * p * (dp - delta), g.bf16);
      for (int64_t d = 0; d < g.dim; ++d) dq[d] += ds * keys[c * g.dim + d];
    }
  }
}

// The launch geometry, or INVALID_ARGUMENT where the grid or shared memory cannot hold it.
absl::StatusOr<Geometry> GeometryOf(const char* op, const FusedAttentionArgs& args) {
  const int64_t query_tiles = (args.t + kRows - 1) / kRows;
  if (args.batch * args.heads > 2147483647 || query_tiles > 65535 ||
      8 * args.head_dim > kStagedBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, " on CUDA: batch * heads (", args.batch * args.heads, ") must be < 2^31, t (", args.t,
        ") <= ", 65535 * kRows, " and head_dim (", args.head_dim, ") <= ", kStagedBytes / 8));
  }
  return Geometry{
      .t = args.t,
      .heads = args.heads,
      .dim = args.head_dim,
      .width = args.heads * args.head_dim,
      .scale = args.scale,
      .bf16 = args.precision == ProductPrecision::kBF16,
      .tile = static_cast<int>(std::clamp<int64_t>(kStagedBytes / (8 * args.head_dim), 1, kRows))};
}

dim3 GridOf(const FusedAttentionArgs& args) {
  return dim3(static_cast<unsigned>(args.batch * args.heads),
              static_cast<unsigned>((args.t + kRows - 1) / kRows));
}

}  // namespace

absl::Status CudaAttentionOps::DoFusedCausalForward(const FusedAttentionArgs& args,
                                                    const Tensor& qkv, Tensor& out,
                                                    Tensor& logsumexp) const {
  ASSIGN_OR_RETURN(const Geometry g, GeometryOf("AttentionOps::FusedCausalForward", args));
  if (args.batch == 0 || args.t == 0) return absl::OkStatus();
  const size_t shared = sizeof(float) * (2 * g.tile * g.dim + kRows * g.tile);
  FusedForwardKernel<<<GridOf(args), kRows, shared, context_.stream>>>(
      g, DevicePointer<float>(qkv), DevicePointer<float>(out), DevicePointer<float>(logsumexp));
  return cuda::LaunchStatus("fused causal attention forward");
}

absl::Status CudaAttentionOps::DoFusedCausalBackward(const FusedAttentionArgs& args,
                                                     const Tensor& qkv, const Tensor& out,
                                                     const Tensor& logsumexp, const Tensor& dout,
                                                     Tensor& dqkv) const {
  ASSIGN_OR_RETURN(const Geometry g, GeometryOf("AttentionOps::FusedCausalBackward", args));
  if (args.batch == 0 || args.t == 0) return absl::OkStatus();
  const float* q = DevicePointer<float>(qkv);
  const float* o = DevicePointer<float>(out);
  const float* lse = DevicePointer<float>(logsumexp);
  const float* d_o = DevicePointer<float>(dout);
  float* dq = DevicePointer<float>(dqkv);
  const size_t keys_shared = sizeof(float) * (2 * g.tile * g.dim + 2 * g.tile);
  FusedBackwardKeysKernel<<<GridOf(args), kRows, keys_shared, context_.stream>>>(g, q, o, lse, d_o,
                                                                                 dq);
  RETURN_IF_ERROR(cuda::LaunchStatus("fused causal attention backward (dk, dv)"));
  const size_t queries_shared = sizeof(float) * 2 * g.tile * g.dim;
  FusedBackwardQueriesKernel<<<GridOf(args), kRows, queries_shared, context_.stream>>>(g, q, o, lse,
                                                                                       d_o, dq);
  return cuda::LaunchStatus("fused causal attention backward (dq)");
}

}  // namespace gpipe
