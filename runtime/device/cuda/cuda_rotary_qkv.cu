// CudaAttentionOps: packing Llama's q, k, v into the fused attention's qkv with rotary position
// embedding and repeated key/value heads, and the transpose for the gradients, in the CPU
// backend's arithmetic (cpu_rotary_qkv.cc). A first kernel fills the [t, head_dim / 2] cos and
// sin table (workspace) as RotaryQkvArgs says; the second gives each thread one rotated pair
// (x_i, x_{i+d/2}) of one head of one row, in the same f32 expressions as the CPU (the build
// turns off FMA contraction); a bf16 qkv (dqkv) is written rounded (read widened) element by
// element. No reductions across threads: the group sums of the gradient are
// each one thread's loop over the group's heads in head order, as the CPU's.
#include <cstdint>

#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/bf16_elements.cuh"
#include "runtime/device/cuda/cuda_attention_ops.h"
#include "runtime/device/cuda/device_pointer.h"
#include "runtime/device/cuda/kernel_launch.h"

namespace gpipe {
namespace {

// The plain values of RotaryQkvArgs that the kernels read; rows = batch * t.
struct RotaryShape {
  int64_t rows = 0;
  int64_t t = 0;
  int64_t heads = 1;
  int64_t kv_heads = 1;
  int64_t head_dim = 2;
};

// cos and sin of position s's angle for pair i, at [s * half + i] of each table. The CPU takes
// inv_freq's power with glibc's powf, which evaluates in double and rounds once; here pow in
// double (at most 2 double ulps) rounded to f32 gives the same float except where the exact
// power lies within a few double ulps of a float rounding boundary. CUDA's own powf (up to a few
// f32 ulps) would differ more often, and an inv_freq one ulp off moves the angle of position s by
// s ulps of inv_freq. cos and sin are in double rounded to f32, as the CPU; at most one f32 ulp
// apart from glibc's, which the conformance tolerance covers.
__global__ void RotaryTableKernel(int64_t t, int64_t head_dim, float rope_theta, float* cos_table,
                                  float* sin_table) {
  const int64_t half = head_dim / 2;
  const int64_t entries = t * half;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < entries;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t s = e / half;
    const int64_t i = e % half;
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    const float power =
        static_cast<float>(pow(static_cast<double>(rope_theta), static_cast<double>(exponent)));
    const float inv_freq = 1.0f / power;
    const float angle = static_cast<float>(s) * inv_freq;
    cos_table[e] = static_cast<float>(cos(static_cast<double>(angle)));
    sin_table[e] = static_cast<float>(sin(static_cast<double>(angle)));
  }
}

// (lo, hi) = (x_i, x_{i+d/2}) rotated by +angle, or by -angle when `inverse` (the CPU's Rotate).
__device__ inline void Rotate(float x_lo, float x_hi, float c, float s, bool inverse, float& lo,
                              float& hi) {
  const float sn = (inverse ? -1.0f : 1.0f) * s;
  lo = x_lo * c - x_hi * sn;
  hi = x_hi * c + x_lo * sn;
}

// One thread per (row, unit, pair i): units 0 .. heads - 1 are query heads, heads .. heads +
// kv_heads - 1 the key/value heads. Rows, units and pairs go in that order, so consecutive
// threads touch consecutive values of a head.
struct PairJob {
  int64_t row;
  int64_t unit;
  int64_t i;
};

__device__ inline PairJob JobAt(int64_t job, int64_t units, int64_t half) {
  const int64_t per_row = units * half;
  const int64_t rem = job % per_row;
  return {job / per_row, rem / half, rem % half};
}

__global__ void PackRotaryQkvKernel(RotaryShape shape, const float* cos_table,
                                    const float* sin_table, const float* q, const float* k,
                                    const float* v, cuda::F32OrBf16Out qkv) {
  const int64_t d = shape.head_dim;
  const int64_t half = d / 2;
  const int64_t width = shape.heads * d;
  const int64_t kv_width = shape.kv_heads * d;
  const int64_t group = shape.heads / shape.kv_heads;
  const int64_t units = shape.heads + shape.kv_heads;
  const int64_t jobs = shape.rows * units * half;
  for (int64_t job = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; job < jobs;
       job += int64_t{gridDim.x} * blockDim.x) {
    const PairJob at = JobAt(job, units, half);
    const int64_t table = (at.row % shape.t) * half + at.i;
    const float c = cos_table[table];
    const float s = sin_table[table];
    const int64_t out = at.row * 3 * width;
    float lo, hi;
    if (at.unit < shape.heads) {
      const float* x = q + at.row * width + at.unit * d;
      Rotate(x[at.i], x[at.i + half], c, s, /*inverse=*/false, lo, hi);
      qkv.Store(out + at.unit * d + at.i, lo);
      qkv.Store(out + at.unit * d + at.i + half, hi);
      continue;
    }
    const int64_t g = at.unit - shape.heads;
    const float* x = k + at.row * kv_width + g * d;
    Rotate(x[at.i], x[at.i + half], c, s, /*inverse=*/false, lo, hi);
    const float* vr = v + at.row * kv_width + g * d;
    const float v_lo = vr[at.i];
    const float v_hi = vr[at.i + half];
    for (int64_t j = 0; j < group; ++j) {
      const int64_t h = g * group + j;
      qkv.Store(out + width + h * d + at.i, lo);
      qkv.Store(out + width + h * d + at.i + half, hi);
      qkv.Store(out + 2 * width + h * d + at.i, v_lo);
      qkv.Store(out + 2 * width + h * d + at.i + half, v_hi);
    }
  }
}

__global__ void UnpackRotaryQkvGradKernel(RotaryShape shape, const float* cos_table,
                                          const float* sin_table, cuda::F32OrBf16In dqkv, float* dq,
                                          float* dk, float* dv) {
  const int64_t d = shape.head_dim;
  const int64_t half = d / 2;
  const int64_t width = shape.heads * d;
  const int64_t kv_width = shape.kv_heads * d;
  const int64_t group = shape.heads / shape.kv_heads;
  const int64_t units = shape.heads + shape.kv_heads;
  const int64_t jobs = shape.rows * units * half;
  for (int64_t job = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; job < jobs;
       job += int64_t{gridDim.x} * blockDim.x) {
    const PairJob at = JobAt(job, units, half);
    const int64_t table = (at.row % shape.t) * half + at.i;
    const float c = cos_table[table];
    const float s = sin_table[table];
    const int64_t in = at.row * 3 * width;
    float lo, hi;
    if (at.unit < shape.heads) {
      const int64_t x = in + at.unit * d;
      Rotate(dqkv[x + at.i], dqkv[x + at.i + half], c, s, /*inverse=*/true, lo, hi);
      float* dqr = dq + at.row * width + at.unit * d;
      dqr[at.i] = lo;
      dqr[at.i + half] = hi;
      continue;
    }
    // The group's query heads in head order, summed in f32 from 0, then rotated back once.
    const int64_t g = at.unit - shape.heads;
    float k_lo = 0.0f, k_hi = 0.0f, v_lo = 0.0f, v_hi = 0.0f;
    for (int64_t j = 0; j < group; ++j) {
      const int64_t h = g * group + j;
      k_lo += dqkv[in + width + h * d + at.i];
      k_hi += dqkv[in + width + h * d + at.i + half];
      v_lo += dqkv[in + 2 * width + h * d + at.i];
      v_hi += dqkv[in + 2 * width + h * d + at.i + half];
    }
    Rotate(k_lo, k_hi, c, s, /*inverse=*/true, lo, hi);
    float* dkr = dk + at.row * kv_width + g * d;
    float* dvr = dv + at.row * kv_width + g * d;
    dkr[at.i] = lo;
    dkr[at.i + half] = hi;
    dvr[at.i] = v_lo;
    dvr[at.i + half] = v_hi;
  }
}

RotaryShape ShapeOf(const RotaryQkvArgs& args) {
  return {.rows = args.batch * args.t,
          .t = args.t,
          .heads = args.heads,
          .kv_heads = args.kv_heads,
          .head_dim = args.head_dim};
}

// The cos and sin tables, [2, t * head_dim / 2] in workspace, filled on `stream` (freed in stream
// order when the caller drops it, after the kernels that read it).
absl::StatusOr<Tensor> RotaryTable(const CudaContext& context, const RotaryQkvArgs& args) {
  const int64_t entries = args.t * (args.head_dim / 2);
  ASSIGN_OR_RETURN(Tensor table, Tensor::Empty(*context.workspace, Shape{2, entries}, DType::kF32,
                                               MemoryKind::kWorkspace));
  float* cos_table = DevicePointer<float>(table);
  RotaryTableKernel<<<cuda::BlocksFor(entries), cuda::kThreadsPerBlock, 0, context.stream>>>(
      args.t, args.head_dim, static_cast<float>(args.rope_theta), cos_table, cos_table + entries);
  RETURN_IF_ERROR(cuda::LaunchStatus("rotary table"));
  return table;
}

// Threads for every (row, head or key/value head, pair).
int64_t PairJobs(const RotaryQkvArgs& args) {
  return args.batch * args.t * (args.heads + args.kv_heads) * (args.head_dim / 2);
}

}  // namespace

absl::Status CudaAttentionOps::DoPackRotaryQkv(const RotaryQkvArgs& args, const Tensor& q,
                                               const Tensor& k, const Tensor& v,
                                               Tensor& qkv) const {
  const int64_t jobs = PairJobs(args);
  if (jobs == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(const Tensor table, RotaryTable(context_, args));
  const float* cos_table = DevicePointer<float>(table);
  const float* sin_table = cos_table + args.t * (args.head_dim / 2);
  PackRotaryQkvKernel<<<cuda::BlocksFor(jobs), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      ShapeOf(args), cos_table, sin_table, DevicePointer<float>(q), DevicePointer<float>(k),
      DevicePointer<float>(v), cuda::F32OrBf16Out(qkv));
  return cuda::LaunchStatus("pack rotary qkv");
}

absl::Status CudaAttentionOps::DoUnpackRotaryQkvGrad(const RotaryQkvArgs& args, const Tensor& dqkv,
                                                     Tensor& dq, Tensor& dk, Tensor& dv) const {
  const int64_t jobs = PairJobs(args);
  if (jobs == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(const Tensor table, RotaryTable(context_, args));
  const float* cos_table = DevicePointer<float>(table);
  const float* sin_table = cos_table + args.t * (args.head_dim / 2);
  UnpackRotaryQkvGradKernel<<<cuda::BlocksFor(jobs), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      ShapeOf(args), cos_table, sin_table, cuda::F32OrBf16In(dqkv), DevicePointer<float>(dq),
      DevicePointer<float>(dk), DevicePointer<float>(dv));
  return cuda::LaunchStatus("unpack rotary qkv grad");
}

}  // namespace gpipe
