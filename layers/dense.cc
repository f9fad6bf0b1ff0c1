#include "layers/dense.h"

#include <algorithm>
#include <vector>

#include "runtime/core/status_macros.h"

namespace gpipe {

absl::Status DenseForward(Device& device, const float* in, int64_t rows, int64_t k,
                          const float* weight, const float* bias, int64_t n, float* out) {
  if (bias != nullptr) {
    for (int64_t r = 0; r < rows; ++r) std::copy(bias, bias + n, out + r * n);
  }
  return device.Gemm({.transpose_a = false,
                      .transpose_b = true,
                      .m = rows,
                      .n = n,
                      .k = k,
                      .alpha = 1.0f,
                      .a = in,
                      .lda = k,
                      .b = weight,
                      .ldb = k,
                      .beta = bias != nullptr ? 1.0f : 0.0f,
                      .c = out,
                      .ldc = n});
}

absl::Status DenseParamGrads(Device& device, const float* in, const float* dout, int64_t rows,
                             int64_t k, int64_t n, float* dweight, float* dbias) {
  RETURN_IF_ERROR(device.Gemm({.transpose_a = true,
                               .transpose_b = false,
                               .m = n,
                               .n = k,
                               .k = rows,
                               .alpha = 1.0f,
                               .a = dout,
                               .lda = n,
                               .b = in,
                               .ldb = k,
                               .beta = 1.0f,
                               .c = dweight,
                               .ldc = k}));
  if (dbias != nullptr) {
    std::vector<double> sum(n, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < n; ++o) sum[o] += dout[r * n + o];
    }
    for (int64_t o = 0; o < n; ++o) dbias[o] += static_cast<float>(sum[o]);
  }
  return absl::OkStatus();
}

absl::Status DenseInputGrad(Device& device, const float* dout, int64_t rows, int64_t n,
                            const float* weight, int64_t k, float* din) {
  return device.Gemm({.transpose_a = false,
                      .transpose_b = false,
                      .m = rows,
                      .n = k,
                      .k = n,
                      .alpha = 1.0f,
                      .a = dout,
                      .lda = n,
                      .b = weight,
                      .ldb = k,
                      .beta = 0.0f,
                      .c = din,
                      .ldc = k});
}

}  // namespace gpipe
