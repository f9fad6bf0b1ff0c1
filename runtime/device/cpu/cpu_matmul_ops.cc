#include "runtime/device/cpu/cpu_matmul_ops.h"

namespace gpipe {

absl::Status CpuMatmulOps::Gemm(const MatrixView& a, const MatrixView& b, const MatrixView& c, const GemmOptions& options) const {
  return absl::UnimplementedError("CpuMatmulOps::Gemm: scaffolding");
}

}  // namespace gpipe
