#include <cstdint>

#include "runtime/device/cuda/bf16_elements.cuh"
#include "runtime/device/cuda/cuda_activation_ops.h"
#include "runtime/device/cuda/kernel_launch.h"

namespace gpipe {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

// The same float expressions as the CPU backend (cpu_activation_ops.cc); erff/expf/tanhf may
// differ from glibc's in the last bits, which the conformance tolerances allow.
__device__ float Forward(Activation activation, float x) {
  switch (activation) {
    case Activation::kRelu:
      return x <= 0.0f ? 0.0f : x;  // NaN passes through, as torch.relu
    case Activation::kTanh:
      return tanhf(x);
    case Activation::kGelu:
      return x * 0.5f * (1.0f + erff(x * kInvSqrt2));
  }
  return x;
}

__device__ float Backward(Activation activation, float saved, float dy) {
  switch (activation) {
    case Activation::kRelu:
      return saved > 0.0f ? dy : 0.0f;
    case Activation::kTanh:
      return dy * (1.0f - saved * saved);
    case Activation::kGelu: {
      const float cdf = 0.5f * (1.0f + erff(saved * kInvSqrt2));
      const float pdf = kInvSqrt2Pi * expf(-0.5f * saved * saved);
      return dy * (cdf + saved * pdf);
    }
  }
  return dy;
}

// Operands are f32 or bf16 (mixed precision's storage): computed in f32 on the exact widening,
// a bf16 output rounded to nearest even, as the CPU backend does.
__global__ void ForwardKernel(Activation activation, cuda::F32OrBf16In x, cuda::F32OrBf16Out y,
                              int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y.Store(i, Forward(activation, x[i]));
  }
}

__global__ void BackwardKernel(Activation activation, cuda::F32OrBf16In saved, cuda::F32OrBf16In dy,
                               cuda::F32OrBf16Out dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dx.Store(i, Backward(activation, saved[i], dy[i]));
  }
}

// SwiGLU in the CPU backend's float expressions (cpu_activation_ops.cc): silu(g) = g / (1 +
// exp(-g)), torch's formula; expf may differ from glibc's in the last bit. f32 or bf16 operands,
// as above.
__global__ void SwiGluForwardKernel(cuda::F32OrBf16In gate, cuda::F32OrBf16In up,
                                    cuda::F32OrBf16Out y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = gate[i];
    y.Store(i, g / (1.0f + expf(-g)) * up[i]);
  }
}

__global__ void SwiGluBackwardKernel(cuda::F32OrBf16In gate, cuda::F32OrBf16In up,
                                     cuda::F32OrBf16In dy, cuda::F32OrBf16Out dgate,
                                     cuda::F32OrBf16Out dup, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = gate[i];
    const float grad = dy[i];
    const float s = 1.0f / (1.0f + expf(-g));
    dgate.Store(i, grad * up[i] * (s * (1.0f + g * (1.0f - s))));
    dup.Store(i, grad * (g / (1.0f + expf(-g))));
  }
}

}  // namespace

absl::Status CudaActivationOps::DoForward(Activation activation, const Tensor& x, Tensor& y) const {
  const int64_t n = x.num_elements();
  if (n == 0) return absl::OkStatus();
  ForwardKernel<<<cuda::BlocksFor(n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      activation, cuda::F32OrBf16In(x), cuda::F32OrBf16Out(y), n);
  return cuda::LaunchStatus("activation forward");
}

absl::Status CudaActivationOps::DoBackward(Activation activation, const Tensor& saved,
                                           const Tensor& dy, Tensor& dx) const {
  const int64_t n = dy.num_elements();
  if (n == 0) return absl::OkStatus();
  BackwardKernel<<<cuda::BlocksFor(n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      activation, cuda::F32OrBf16In(saved), cuda::F32OrBf16In(dy), cuda::F32OrBf16Out(dx), n);
  return cuda::LaunchStatus("activation backward");
}

absl::Status CudaActivationOps::DoSwiGluForward(const Tensor& gate, const Tensor& up,
                                                Tensor& y) const {
  const int64_t n = gate.num_elements();
  if (n == 0) return absl::OkStatus();
  SwiGluForwardKernel<<<cuda::BlocksFor(n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      cuda::F32OrBf16In(gate), cuda::F32OrBf16In(up), cuda::F32OrBf16Out(y), n);
  return cuda::LaunchStatus("SwiGLU forward");
}

absl::Status CudaActivationOps::DoSwiGluBackward(const Tensor& gate, const Tensor& up,
                                                 const Tensor& dy, Tensor& dgate,
                                                 Tensor& dup) const {
  const int64_t n = gate.num_elements();
  if (n == 0) return absl::OkStatus();
  SwiGluBackwardKernel<<<cuda::BlocksFor(n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      cuda::F32OrBf16In(gate), cuda::F32OrBf16In(up), cuda::F32OrBf16In(dy),
      cuda::F32OrBf16Out(dgate), cuda::F32OrBf16Out(dup), n);
  return cuda::LaunchStatus("SwiGLU backward");
}

}  // namespace gpipe
