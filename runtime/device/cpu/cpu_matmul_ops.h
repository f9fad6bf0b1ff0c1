// CpuMatmulOps: the CPU backend's MatmulOps (see runtime/device/ops/matmul_ops.h for the contracts).
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_MATMUL_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_MATMUL_OPS_H_

#include "runtime/device/cpu/dnnl_context.h"
#include "runtime/device/ops/matmul_ops.h"

namespace gpipe {

class CpuMatmulOps final : public MatmulOps {
 public:
  explicit CpuMatmulOps(DnnlContext& dnnl) : dnnl_(dnnl) {}
  absl::Status Gemm(const MatrixView& a, const MatrixView& b, const MatrixView& c, const GemmOptions& options) const override;

 private:
  DnnlContext& dnnl_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_MATMUL_OPS_H_
