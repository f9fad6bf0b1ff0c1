// CpuNormOps: the CPU backend's NormOps (see runtime/device/ops/norm_ops.h for the contracts):
// loops with double statistics, the layers' former arithmetic unchanged. Layer norm keeps
// [mean_hi, mean_lo, rstd] per row and batch norm [mean_hi, mean_lo, inv_std] per channel,
// hi + lo carrying the double mean (cpu_norm_ops.cc, cpu_batch_norm_ops.cc).
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_NORM_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_NORM_OPS_H_

#include "runtime/device/ops/norm_ops.h"

namespace gpipe {

class CpuNormOps final : public NormOps {
 private:
  absl::Status DoLayerNormForward(const LayerNormArgs& args, const Tensor& x, Tensor& y,
                                  Tensor& stats) const override;
  absl::Status DoLayerNormBackwardInput(const LayerNormArgs& args, const Tensor& x,
                                        const Tensor& stats, const Tensor& dy,
                                        Tensor& dx) const override;
  absl::Status DoLayerNormBackwardParams(const LayerNormArgs& args, const Tensor& x,
                                         const Tensor& stats, const Tensor& dy, Tensor& dweight,
                                         Tensor& dbias) const override;
  // cpu_rms_norm_ops.cc.
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
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_NORM_OPS_H_
