// Dense (fully connected) kernels on row-major float buffers, torch.nn.Linear's arithmetic:
// the one implementation behind the linear layer and the attention projections, so both compute
// bit for bit the same way. W is [n, k] (PyTorch's [out_features, in_features]).
#ifndef GPIPE_LAYERS_DENSE_H_
#define GPIPE_LAYERS_DENSE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/device/device.h"

namespace gpipe {

// out[rows, n] = in[rows, k] W[n, k]^T (+ b[n] when bias is not null).
absl::Status DenseForward(Device& device, const float* in, int64_t rows, int64_t k,
                          const float* weight, const float* bias, int64_t n, float* out);

// dW[n, k] += dout[rows, n]^T in[rows, k]; db[n] += column sums of dout, summed in double and
// added once (when dbias is not null).
absl::Status DenseParamGrads(Device& device, const float* in, const float* dout, int64_t rows,
                             int64_t k, int64_t n, float* dweight, float* dbias);

// din[rows, k] = dout[rows, n] W[n, k].
absl::Status DenseInputGrad(Device& device, const float* dout, int64_t rows, int64_t n,
                            const float* weight, int64_t k, float* din);

}  // namespace gpipe

#endif  // GPIPE_LAYERS_DENSE_H_
