// CudaActivationOps: ActivationOps (runtime/device/ops/activation_ops.h) on the GPU, issued on the
// context's compute stream. Its kernels run after ActivationOps' entries have checked their
// arguments.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_ACTIVATION_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_ACTIVATION_OPS_H_

#include "runtime/device/cuda/cuda_context.h"
#include "runtime/device/ops/activation_ops.h"

namespace gpipe {

class CudaActivationOps final : public ActivationOps {
 public:
  explicit CudaActivationOps(const CudaContext& context) : context_(context) {}

 private:
  absl::Status DoForward(Activation activation, const Tensor& x, Tensor& y) const override;
  absl::Status DoBackward(Activation activation, const Tensor& saved, const Tensor& dy,
                          Tensor& dx) const override;
  absl::Status DoSwiGluForward(const Tensor& gate, const Tensor& up, Tensor& y) const override;
  absl::Status DoSwiGluBackward(const Tensor& gate, const Tensor& up, const Tensor& dy,
                                Tensor& dgate, Tensor& dup) const override;

  const CudaContext& context_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_ACTIVATION_OPS_H_
