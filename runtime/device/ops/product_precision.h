// ProductPrecision: how a product (a matrix product, a convolution) rounds its inputs.
//
// kBF16 (mixed precision, training.precision BF16): every element of both operands is rounded to
// bf16 (round to nearest even) and the products are summed with f32 accumulation, as bf16 tensor
// cores do; outputs, scale factors and biases stay f32. The product of two bf16 values is exact in
// f32, so every backend agrees with a reference on the rounded inputs to f32 accumulation error,
// whatever its kernels (native bf16, or f32 kernels on pre-rounded values).
#ifndef GPIPE_RUNTIME_DEVICE_OPS_PRODUCT_PRECISION_H_
#define GPIPE_RUNTIME_DEVICE_OPS_PRODUCT_PRECISION_H_

namespace gpipe {

enum class ProductPrecision : int { kF32 = 0, kBF16 = 1 };

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_PRODUCT_PRECISION_H_
