#include "runtime/device/ops/matmul_ops.h"

#include "runtime/core/status_macros.h"

namespace gpipe {

absl::Status MatmulOps::Gemm(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                             const GemmOptions& options) const {
  RETURN_IF_ERROR(ValidateGemm("MatmulOps::Gemm", a, b, c, options));
  return DoGemm(a, b, c, options);
}

}  // namespace gpipe
