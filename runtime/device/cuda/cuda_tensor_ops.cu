#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/core/rng.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/bf16_elements.cuh"
#include "runtime/device/cuda/block_reduce.cuh"
#include "runtime/device/cuda/cuda_status.h"
#include "runtime/device/cuda/cuda_tensor_ops.h"
#include "runtime/device/cuda/device_pointer.h"
#include "runtime/device/cuda/kernel_launch.h"
#include "runtime/device/cuda/philox.cuh"
#include "runtime/device/cuda/sum_accumulate.h"
#include "runtime/device/ops/op_checks.h"

namespace gpipe {
namespace {

using op_checks::AtLeast;
using op_checks::DTypeIs;
using op_checks::Elements;

#define GPIPE_GRID_STRIDE(i, n)                                             \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += int64_t{gridDim.x} * blockDim.x)

using cuda::ToBf16;

template <typename T>
__global__ void FillKernel(T* out, T value, int64_t n) {
  GPIPE_GRID_STRIDE(i, n) out[i] = value;
}

__global__ void AddKernel(const float* a, const float* b, float* out, int64_t n) {
  GPIPE_GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void AxpyKernel(float alpha, const float* x, float* y, int64_t n) {
  GPIPE_GRID_STRIDE(i, n) y[i] = y[i] + alpha * x[i];
}

__global__ void ScaleKernel(float alpha, float* x, int64_t n) {
  GPIPE_GRID_STRIDE(i, n) x[i] = x[i] * alpha;
}

__global__ void F32ToBf16Kernel(const float* in, uint16_t* out, int64_t n) {
  GPIPE_GRID_STRIDE(i, n) out[i] = ToBf16(__float_as_uint(in[i]));
}

__global__ void Bf16ToF32Kernel(const uint16_t* in, float* out, int64_t n) {
  GPIPE_GRID_STRIDE(i, n) out[i] = __uint_as_float(static_cast<uint32_t>(in[i]) << 16);
}

__global__ void F32ToF64Kernel(const float* in, double* out, int64_t n) {
  GPIPE_GRID_STRIDE(i, n) out[i] = in[i];
}

__global__ void F64ToF32Kernel(const double* in, float* out, int64_t n) {
  GPIPE_GRID_STRIDE(i, n) out[i] = static_cast<float>(in[i]);
}

__global__ void UniformKernel(cuda::PhiloxStream s, uint64_t first_word, double low, double width,
                              float* out, int64_t n) {
  GPIPE_GRID_STRIDE(i, n) {
    out[i] = static_cast<float>(low + width * cuda::PhiloxUniform(s, first_word + i));
  }
}

__global__ void NormalKernel(cuda::PhiloxStream s, uint64_t first_word, double stddev, float* out,
                             int64_t n) {
  GPIPE_GRID_STRIDE(i, n) {
    out[i] = static_cast<float>(stddev * cuda::PhiloxNormal(s, first_word + 2 * i));
  }
}

__global__ void DropoutKernel(cuda::PhiloxStream s, uint64_t first_word, double p, float scale,
                              const float* in, float* out, int64_t n) {
  GPIPE_GRID_STRIDE(i, n) {
    const bool keep = static_cast<double>(cuda::PhiloxUniform(s, first_word + i)) >= p;
    out[i] = keep ? in[i] * scale : 0.0f;
  }
}

// Every thread that finds a NaN or infinity stores the same 1.0f: the result does not depend on
// which one wins.
__global__ void FlagNonFiniteKernel(const float* values, int64_t n, float* flag) {
  GPIPE_GRID_STRIDE(i, n) {
    if ((__float_as_uint(values[i]) & 0x7f800000u) == 0x7f800000u) *flag = 1.0f;
  }
}

// SumSquares in two fixed-order passes. Pass 1, one launch per tensor: BlocksFor(n, threads,
// kSumSquaresPartials) blocks (a function of n only), each thread adding its grid-stride
// elements in double, then the block's tree into partials[blockIdx.x]. Pass 2, one launch per
// group of tensors: one block of kSumSquaresPartials threads per tensor adds its partials in a
// tree (the unused ones are zeroed first, and x + 0 == x). Nothing depends on the other tensors,
// on the tensor's position or on timing; no atomics.
constexpr int kSumSquaresPartials = 1024;

__global__ void SumSquaresPartialKernel(const float* values, int64_t n, double* partials) {
  __shared__ double scratch[32];
  double sum = 0.0;
  GPIPE_GRID_STRIDE(i, n) {
    const double x = values[i];
    sum += x * x;
  }
  sum = cuda::BlockReduce(sum, cuda::SumOp{}, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// Block b sums partials[b * kSumSquaresPartials ...] into sums[b]; blockDim.x ==
// kSumSquaresPartials.
__global__ void SumSquaresFinalKernel(const double* partials, double* sums) {
  __shared__ double scratch[32];
  const double partial = partials[blockIdx.x * int64_t{kSumSquaresPartials} + threadIdx.x];
  const double sum = cuda::BlockReduce(partial, cuda::SumOp{}, scratch);
  if (threadIdx.x == 0) sums[blockIdx.x] = sum;
}

#undef GPIPE_GRID_STRIDE

cuda::PhiloxStream StreamOf(const RandomKey& key) {
  return {.key0 = static_cast<uint32_t>(key.seed),
          .key1 = static_cast<uint32_t>(key.seed >> 32),
          .stream = MixKey({key.key[0], key.key[1], key.key[2]})};
}

}  // namespace

absl::Status CudaTensorOps::DoFill(Tensor& out, double value) const {
  const int64_t n = out.num_elements();
  if (n == 0) return absl::OkStatus();
  const unsigned blocks = cuda::BlocksFor(n);
  cudaStream_t stream = context_.stream;
  switch (out.dtype()) {
    case DType::kF32:
      FillKernel<<<blocks, cuda::kThreadsPerBlock, 0, stream>>>(DevicePointer<float>(out),
                                                                static_cast<float>(value), n);
      return cuda::LaunchStatus("fill f32");
    case DType::kF64:
      FillKernel<<<blocks, cuda::kThreadsPerBlock, 0, stream>>>(DevicePointer<double>(out), value,
                                                                n);
      return cuda::LaunchStatus("fill f64");
    case DType::kI64:
      FillKernel<<<blocks, cuda::kThreadsPerBlock, 0, stream>>>(DevicePointer<int64_t>(out),
                                                                static_cast<int64_t>(value), n);
      return cuda::LaunchStatus("fill i64");
    case DType::kBF16: {
      const float f = static_cast<float>(value);
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof(bits));
      FillKernel<<<blocks, cuda::kThreadsPerBlock, 0, stream>>>(
          static_cast<uint16_t*>(out.raw_data()), ToBf16(bits), n);
      return cuda::LaunchStatus("fill bf16");
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("Fill: unknown dtype of ", out.DebugString()));
}

absl::Status CudaTensorOps::DoCopy(const Tensor& in, Tensor& out) const {
  if (in.raw_data() == out.raw_data() || in.bytes() == 0) return absl::OkStatus();
  GPIPE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.raw_data(), in.raw_data(),
                                             static_cast<size_t>(in.bytes()),
                                             cudaMemcpyDeviceToDevice, context_.stream));
  return absl::OkStatus();
}

absl::Status CudaTensorOps::DoAdd(const Tensor& a, const Tensor& b, Tensor& out) const {
  const int64_t n = a.num_elements();
  if (n == 0) return absl::OkStatus();
  AddKernel<<<cuda::BlocksFor(n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      DevicePointer<float>(a), DevicePointer<float>(b), DevicePointer<float>(out), n);
  return cuda::LaunchStatus("add");
}

absl::Status CudaTensorOps::DoAxpy(float alpha, const Tensor& x, Tensor& y) const {
  const int64_t n = x.num_elements();
  if (n == 0) return absl::OkStatus();
  AxpyKernel<<<cuda::BlocksFor(n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      alpha, DevicePointer<float>(x), DevicePointer<float>(y), n);
  return cuda::LaunchStatus("axpy");
}

absl::Status CudaTensorOps::DoScale(float alpha, Tensor& x) const {
  const int64_t n = x.num_elements();
  if (n == 0) return absl::OkStatus();
  ScaleKernel<<<cuda::BlocksFor(n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      alpha, DevicePointer<float>(x), n);
  return cuda::LaunchStatus("scale");
}

absl::Status CudaTensorOps::DoCast(const Tensor& in, Tensor& out) const {
  const int64_t n = in.num_elements();
  const DType from = in.dtype();
  const DType to = out.dtype();
  if (from == to) return Copy(in, out);
  const unsigned blocks = cuda::BlocksFor(n);
  cudaStream_t stream = context_.stream;
  if (n == 0) return absl::OkStatus();
  if (from == DType::kF32 && to == DType::kBF16) {
    F32ToBf16Kernel<<<blocks, cuda::kThreadsPerBlock, 0, stream>>>(
        DevicePointer<float>(in), static_cast<uint16_t*>(out.raw_data()), n);
    return cuda::LaunchStatus("cast f32 to bf16");
  }
  if (from == DType::kBF16 && to == DType::kF32) {
    Bf16ToF32Kernel<<<blocks, cuda::kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint16_t*>(in.raw_data()), DevicePointer<float>(out), n);
    return cuda::LaunchStatus("cast bf16 to f32");
  }
  if (from == DType::kF32 && to == DType::kF64) {
    F32ToF64Kernel<<<blocks, cuda::kThreadsPerBlock, 0, stream>>>(DevicePointer<float>(in),
                                                                  DevicePointer<double>(out), n);
    return cuda::LaunchStatus("cast f32 to f64");
  }
  if (from == DType::kF64 && to == DType::kF32) {
    F64ToF32Kernel<<<blocks, cuda::kThreadsPerBlock, 0, stream>>>(DevicePointer<double>(in),
                                                                  DevicePointer<float>(out), n);
    return cuda::LaunchStatus("cast f64 to f32");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("Cast: no conversion from ", DTypeName(from), " to ", DTypeName(to)));
}

absl::Status CudaTensorOps::DoSumAccumulate(const Tensor& in, int64_t outer, int64_t mid,
                                            int64_t inner, Tensor& out) const {
  if (mid == 0) return absl::OkStatus();
  cuda::LaunchSumAccumulate(cuda::F32OrBf16In(in), outer, mid, inner, DevicePointer<float>(out),
                            context_.stream);
  return cuda::LaunchStatus("sum accumulate");
}

absl::Status CudaTensorOps::DoFillRandom(const RandomKey& key, RandomDistribution distribution,
                                         double a, double b, Tensor& out) const {
  const int64_t n = out.num_elements();
  if (n == 0) return absl::OkStatus();
  const cuda::PhiloxStream stream = StreamOf(key);
  switch (distribution) {
    case RandomDistribution::kUniform:
      UniformKernel<<<cuda::BlocksFor(n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
          stream, key.first_word, a, b, DevicePointer<float>(out), n);
      return cuda::LaunchStatus("fill uniform");
    case RandomDistribution::kNormal:
      NormalKernel<<<cuda::BlocksFor(n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
          stream, key.first_word, a, DevicePointer<float>(out), n);
      return cuda::LaunchStatus("fill normal");
  }
  return absl::InvalidArgumentError("FillRandom: unknown distribution");
}

absl::Status CudaTensorOps::DoDropoutMask(const RandomKey& key, double p, const Tensor& in,
                                          Tensor& out) const {
  const int64_t n = in.num_elements();
  if (n == 0) return absl::OkStatus();
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  DropoutKernel<<<cuda::BlocksFor(n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      StreamOf(key), key.first_word, p, scale, DevicePointer<float>(in), DevicePointer<float>(out),
      n);
  return cuda::LaunchStatus("dropout mask");
}

absl::Status CudaTensorOps::DoFlagNonFinite(std::span<const Tensor> tensors, Tensor& flag) const {
  float* flag_ptr = DevicePointer<float>(flag);
  for (const Tensor& t : tensors) {
    const int64_t n = t.num_elements();
    if (n == 0) continue;
    FlagNonFiniteKernel<<<cuda::BlocksFor(n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
        DevicePointer<float>(t), n, flag_ptr);
    RETURN_IF_ERROR(cuda::LaunchStatus("flag non-finite"));
  }
  return absl::OkStatus();
}

absl::Status CudaTensorOps::DoSumSquares(std::span<const Tensor> tensors, Tensor& out) const {
  // Tensors go in groups of at most kGroup, so the partials' scratch stays small (512 KiB) for
  // any number of parameters; each group reuses it after the previous group's final pass
  // (stream order). Launches: one per non-empty tensor plus two per group, with no per-step
  // upload of a pointer table.
  constexpr size_t kGroup = 64;
  if (tensors.empty()) return absl::OkStatus();
  const size_t group_capacity = std::min(kGroup, tensors.size());
  ASSIGN_OR_RETURN(Tensor partials,
                   Tensor::Empty(*context_.workspace,
                                 Shape{static_cast<int64_t>(group_capacity * kSumSquaresPartials)},
                                 DType::kF64, MemoryKind::kWorkspace));
  double* partials_ptr = DevicePointer<double>(partials);
  double* sums = DevicePointer<double>(out);
  for (size_t first = 0; first < tensors.size(); first += kGroup) {
    const size_t count = std::min(kGroup, tensors.size() - first);
    GPIPE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
        partials_ptr, 0, count * kSumSquaresPartials * sizeof(double), context_.stream));
    for (size_t t = 0; t < count; ++t) {
      const Tensor& tensor = tensors[first + t];
      const int64_t n = tensor.num_elements();
      if (n == 0) continue;
      SumSquaresPartialKernel<<<cuda::BlocksFor(n, cuda::kThreadsPerBlock, kSumSquaresPartials),
                                cuda::kThreadsPerBlock, 0, context_.stream>>>(
          DevicePointer<float>(tensor), n, partials_ptr + t * kSumSquaresPartials);
      RETURN_IF_ERROR(cuda::LaunchStatus("sum squares"));
    }
    SumSquaresFinalKernel<<<static_cast<unsigned>(count), kSumSquaresPartials, 0,
                            context_.stream>>>(partials_ptr, sums + first);
    RETURN_IF_ERROR(cuda::LaunchStatus("sum squares (final)"));
  }
  return absl::OkStatus();
}

}  // namespace gpipe
