// Dense (fully connected) products on device tensors, torch.nn.Linear's arithmetic: the one
// implementation behind the linear layer and the attention projections, so both compute bit for
// bit the same way. W is [n, k] (PyTorch's [out_features, in_features]); activations are viewed
// as [rows, features] matrices of their tensors. Everything runs through device.ops().
#ifndef GPIPE_LAYERS_DENSE_H_
#define GPIPE_LAYERS_DENSE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"
#include "runtime/device/ops/matmul_ops.h"

namespace gpipe {

// out[rows, n] = in[rows, k] W[n, k]^T (+ b[n] when bias is not null).
absl::Status DenseForward(Device& device, const Tensor& in, int64_t rows, int64_t k,
                          const Tensor& weight, const Tensor* bias, int64_t n, Tensor& out,
                          ProductPrecision precision);

// dW[n, k] += dout[rows, n]^T in[rows, k]; db[n] += column sums of dout, summed in double and
// added once (when dbias is not null).
absl::Status DenseParamGrads(Device& device, const Tensor& in, const Tensor& dout, int64_t rows,
                             int64_t k, int64_t n, Tensor& dweight, Tensor* dbias,
                             ProductPrecision precision);

// din[rows, k] = dout[rows, n] W[n, k].
absl::Status DenseInputGrad(Device& device, const Tensor& dout, int64_t rows, int64_t n,
                            const Tensor& weight, int64_t k, Tensor& din,
                            ProductPrecision precision);

}  // namespace gpipe

#endif  // GPIPE_LAYERS_DENSE_H_
