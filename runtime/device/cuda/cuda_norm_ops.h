// CudaNormOps: NormOps (runtime/device/ops/norm_ops.h) on the GPU, issued on the context's
// compute stream. Its kernels run after NormOps' entries have checked their arguments; the one
// check of its own is the GPU's block limit on batch norm's channels (one block each).
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_NORM_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_NORM_OPS_H_

#include "runtime/device/cuda/cuda_context.h"
#include "runtime/device/ops/norm_ops.h"

namespace gpipe {

class CudaNormOps final : public NormOps {
 public:
  explicit CudaNormOps(const CudaContext& context) : context_(context) {}

 private:
  absl::Status DoLayerNormForward(const LayerNormArgs& args, const Tensor& x, Tensor& y,
                                  Tensor& stats) const override;
  absl::Status DoLayerNormBackwardInput(const LayerNormArgs& args, const Tensor& x,
                                        const Tensor& stats, const Tensor& dy,
                                        Tensor& dx) const override;
  absl::Status DoLayerNormBackwardParams(const LayerNormArgs& args, const Tensor& x,
                                         const Tensor& stats, const Tensor& dy, Tensor& dweight,
                                         Tensor& dbias) const override;
  // cuda_rms_norm_ops.cu.
  absl::Status DoRmsNormForward(const RmsNormArgs& args, const Tensor& x, Tensor& y,
                                Tensor& stats) const override;
  absl::Status DoRmsNormBackwardInput(const RmsNormArgs& args, const Tensor& x, const Tensor& stats,
                                      const Tensor& dy, Tensor& dx) const override;
  absl::Status DoRmsNormBackwardParams(const RmsNormArgs& args, const Tensor& x,
                                       const Tensor& stats, const Tensor& dy,
                                       Tensor& dweight) const override;
  absl::Status DoBatchNormTrainForward(const BatchNormArgs& args, const Tensor& x,
                                       Tensor& running_mean, Tensor& running_var,
                                       bool update_running, Tensor& y,
                                       Tensor& stats) const override;
  absl::Status DoBatchNormEvalForward(const BatchNormArgs& args, const Tensor& x,
                                      const Tensor& running_mean, const Tensor& running_var,
                                      Tensor& y) const override;
  absl::Status DoBatchNormBackward(const BatchNormArgs& args, const Tensor& x, const Tensor& stats,
                                   const Tensor& dy, Tensor& dx, Tensor& dweight,
                                   Tensor& dbias) const override;

  const CudaContext& context_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_NORM_OPS_H_
