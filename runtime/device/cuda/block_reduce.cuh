// Deterministic reductions inside one thread block: every thread passes its partial value, the
// block combines them in a fixed tree (shared memory, then the first warp), and every thread gets
// the result. The order depends only on blockDim.x, never on timing, so a kernel launched with
// the same block size gives the same bits every time. blockDim.x must be a multiple of 32 and at
// most 1024.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_BLOCK_REDUCE_CUH_
#define GPIPE_RUNTIME_DEVICE_CUDA_BLOCK_REDUCE_CUH_

namespace gpipe::cuda {

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

struct MinOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return b < a ? b : a;
  }
};

// NaN wins, so a row holding NaN keeps it (as std::max_element over the row lets it through
// when NaN comes first; the CPU and GPU then both produce NaN rows).
struct MaxOp {
  __device__ float operator()(float a, float b) const {
    return (a != a || a > b) ? a : (b != b ? b : (b > a ? b : a));
  }
};

// `scratch` holds at least 32 values of T in shared memory.
template <typename T, typename Op>
__device__ T BlockReduce(T value, Op op, T* scratch) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  for (int offset = 16; offset > 0; offset /= 2) {
    value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
  }
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  const unsigned warps = blockDim.x / 32;
  if (warp == 0) {
    value = lane < warps ? scratch[lane] : scratch[0];
    // Lanes past `warps` hold a copy of scratch[0] and are never combined below.
    for (int offset = 16; offset > 0; offset /= 2) {
      const T other = __shfl_down_sync(0xffffffffu, value, offset);
      if (lane + offset < warps) value = op(value, other);
    }
    if (lane == 0) scratch[0] = value;
  }
  __syncthreads();
  return scratch[0];
}

// The block's arg-max in the CPU backend's rule (cpu_loss_ops.cc): the largest value, ties to the
// lowest index, NaN never chosen. Each thread passes the best (value, index) of its own elements
// (start from -infinity and kArgMaxNoIndex); every thread gets the block's. The choice is a total
// order, so the result does not depend on the combining tree. `values` and `indices` are shared
// memory of 32 entries each.
inline constexpr long long kArgMaxNoIndex = 0x7fffffffffffffffLL;

__device__ inline bool ArgMaxPrefers(float value, long long index, float best,
                                     long long best_index) {
  return value > best || (value == best && index < best_index);
}

__device__ inline void BlockArgMax(float& value, long long& index, float* values,
                                   long long* indices) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_down_sync(0xffffffffu, value, offset);
    const long long other_index = __shfl_down_sync(0xffffffffu, index, offset);
    if (ArgMaxPrefers(other, other_index, value, index)) {
      value = other;
      index = other_index;
    }
  }
  __syncthreads();  // the scratch may still be read by a previous call
  if (lane == 0) {
    values[warp] = value;
    indices[warp] = index;
  }
  __syncthreads();
  const unsigned warps = blockDim.x / 32;
  if (warp == 0) {
    // Lanes past `warps` hold a copy of warp 0's best, which changes nothing (the rule is
    // idempotent).
    value = lane < warps ? values[lane] : values[0];
    index = lane < warps ? indices[lane] : indices[0];
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_down_sync(0xffffffffu, value, offset);
      const long long other_index = __shfl_down_sync(0xffffffffu, index, offset);
      if (ArgMaxPrefers(other, other_index, value, index)) {
        value = other;
        index = other_index;
      }
    }
    if (lane == 0) {
      values[0] = value;
      indices[0] = index;
    }
  }
  __syncthreads();
  value = values[0];
  index = indices[0];
}

// Column sums over a 2-D block of kColumnTile x kColumnLanes threads: thread (x, y) passes its
// partial sum of column x (over rows y, y + kColumnLanes, ...); thread (x, 0) gets the column's
// total, the lanes added in order 0, 1, ... (a fixed order: the same bits every run). Every
// thread of the block must call it; `scratch` is shared memory of kColumnLanes * kColumnTile
// values.
inline constexpr int kColumnTile = 32;
inline constexpr int kColumnLanes = 16;

template <typename T>
__device__ T SumOverColumnLanes(T value, T* scratch) {
  __syncthreads();  // scratch may still be read by a previous call
  scratch[threadIdx.y * kColumnTile + threadIdx.x] = value;
  __syncthreads();
  T total = 0;
  if (threadIdx.y == 0) {
    for (int lane = 0; lane < kColumnLanes; ++lane)
      total += scratch[lane * kColumnTile + threadIdx.x];
  }
  return total;
}

}  // namespace gpipe::cuda

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_BLOCK_REDUCE_CUH_
