#include <cstdint>

#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_optimizer_ops.h"
#include "runtime/device/cuda/device_pointer.h"
#include "runtime/device/cuda/kernel_launch.h"
#include "runtime/device/ops/op_checks.h"

namespace gpipe {
namespace {

using op_checks::DTypeIs;
using op_checks::Elements;

// torch.lerp's float formula, as the CPU backend computes it.
__device__ float Lerp(float start, float end, float weight) {
  return fabsf(weight) < 0.5f ? start + weight * (end - start)
                              : end - (end - start) * (1.0f - weight);
}

// The CPU backend's update (cpu_optimizer_ops.cc) term by term, in float; the build turns off
// multiply-add contraction, so every element rounds as on the CPU.
__global__ void SgdKernel(SgdUpdate u, float* p, const float* grad, float* buf, int64_t n) {
  const bool momentum = u.momentum != 0;
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < n;
       j += int64_t{gridDim.x} * blockDim.x) {
    float g = grad[j];
    if (u.weight_decay != 0) g = g + u.weight_decay * p[j];
    if (momentum) {
      const float b = u.first_step ? g : buf[j] * u.momentum + u.one_minus_dampening * g;
      buf[j] = b;
      g = u.nesterov ? g + u.momentum * b : b;
    }
    p[j] = p[j] + u.neg_lr * g;
  }
}

__global__ void AdamKernel(AdamUpdate u, float* p, const float* grad, float* m, float* v,
                           int64_t n) {
  const bool decoupled = u.decoupled_scale != 1.0f;
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < n;
       j += int64_t{gridDim.x} * blockDim.x) {
    float g = grad[j];
    float param = p[j];
    if (decoupled) {
      param = param * u.decoupled_scale;
    } else if (u.l2 != 0) {
      g = g + u.l2 * param;
    }
    const float m_new = Lerp(m[j], g, u.lerp_weight);
    const float v_new = v[j] * u.beta2 + u.one_minus_beta2 * g * g;
    m[j] = m_new;
    v[j] = v_new;
    const float denom = sqrtf(v_new) / u.bias_correction2_sqrt + u.eps;
    p[j] = param + u.neg_step_size * m_new / denom;
  }
}

}  // namespace

absl::Status CudaOptimizerOps::DoSgd(const SgdUpdate& u, Tensor& param, const Tensor& grad,
                                     Tensor& momentum_buffer) const {
  const int64_t n = param.num_elements();
  const bool use_momentum = u.momentum != 0;
  if (n == 0) return absl::OkStatus();
  SgdKernel<<<cuda::BlocksFor(n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      u, DevicePointer<float>(param), DevicePointer<float>(grad),
      use_momentum ? DevicePointer<float>(momentum_buffer) : nullptr, n);
  return cuda::LaunchStatus("sgd update");
}

absl::Status CudaOptimizerOps::DoAdam(const AdamUpdate& u, Tensor& param, const Tensor& grad,
                                      Tensor& exp_avg, Tensor& exp_avg_sq) const {
  const int64_t n = param.num_elements();
  if (n == 0) return absl::OkStatus();
  AdamKernel<<<cuda::BlocksFor(n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      u, DevicePointer<float>(param), DevicePointer<float>(grad), DevicePointer<float>(exp_avg),
      DevicePointer<float>(exp_avg_sq), n);
  return cuda::LaunchStatus("adam update");
}

}  // namespace gpipe
