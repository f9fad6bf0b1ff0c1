// TensorOps: the element-wise and reduction basics every part of the runtime needs: fill,
// copy, add, scale, axpy, casts, sums, random fills (Philox: the same bits on every backend),
// dropout masks, and the non-finite check. See runtime/device/ops.h for the common contract.
// Each public entry checks its arguments (the same INVALID_ARGUMENT on every backend) and then
// runs the backend's protected Do kernel.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_TENSOR_OPS_H_
#define GPIPE_RUNTIME_DEVICE_OPS_TENSOR_OPS_H_

#include <array>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "runtime/core/tensor.h"

namespace gpipe {

// A counter-based random stream (runtime/core/rng.h): RandomStream(seed, {key...}) seeked to
// word `first_word`; element i of an op draws from word first_word + i (uniform) or
// first_word + 2 i (normal: two uniforms).
struct RandomKey {
  uint64_t seed = 0;
  std::array<uint64_t, 3> key{};
  uint64_t first_word = 0;
};

enum class RandomDistribution {
  kUniform,  // low + width * u, u uniform in [0, 1) with 24 bits, computed in double
  kNormal,   // stddev * n, n standard normal (Box-Muller), computed in double
};

class TensorOps {
 public:
  virtual ~TensorOps() = default;

  // Every element of `out` (f32, f64 or i64) = value.
  absl::Status Fill(Tensor& out, double value) const;
  // out = in (same dtype and element count; shapes may differ). In place is allowed.
  absl::Status Copy(const Tensor& in, Tensor& out) const;
  // out = a + b (f32, same element count). out may be a or b.
  absl::Status Add(const Tensor& a, const Tensor& b, Tensor& out) const;
  // y += alpha * x (f32, same element count), computed in float as y + alpha * x.
  absl::Status Axpy(float alpha, const Tensor& x, Tensor& y) const;
  // x *= alpha (f32).
  absl::Status Scale(float alpha, Tensor& x) const;
  // out = in converted (f32 <-> bf16 with round-to-nearest-even; f32 <-> f64).
  absl::Status Cast(const Tensor& in, Tensor& out) const;

  // Viewing `in` (f32, or bf16: its exact f32 values) as [outer, mid, inner]: out[m] +=
  // float(sum over o, i of in[o, m, i]), the sum taken in double (over i within each o, then
  // over o in order) and added once, so the error does not grow with the rows. out is f32 with
  // at least `mid` elements, of which the first `mid` are accumulated. (Bias and
  // positional-table gradients; a bf16 `in` is a mixed-precision output gradient.)
  absl::Status SumAccumulate(const Tensor& in, int64_t outer, int64_t mid, int64_t inner,
                             Tensor& out) const;

  // Fills `out` (f32) from the random stream `key` with `distribution`; `a` is low (uniform)
  // or the standard deviation (normal), `b` the width (uniform; unused for normal).
  absl::Status FillRandom(const RandomKey& key, RandomDistribution distribution, double a, double b,
                          Tensor& out) const;
  // Inverted dropout: out[i] = in[i] / (1 - p) where uniform word first_word + i of `key`
  // is >= p, else 0 (f32, same element count; out may be in). 0 <= p < 1.
  absl::Status DropoutMask(const RandomKey& key, double p, const Tensor& in, Tensor& out) const;

  // flag (f32 [1]) becomes 1 if any element of any of `tensors` (f32) is NaN or infinite and
  // keeps its value otherwise; the host reads it once per step.
  absl::Status FlagNonFinite(std::span<const Tensor> tensors, Tensor& flag) const;

  // out (f64, exactly tensors.size() elements)[i] = the sum over the elements of tensors[i]
  // (f32) of double(x) * double(x); 0 for an empty tensor. Deterministic: each sum depends only
  // on its own tensor and the backend, never on the other tensors of the span or its position,
  // so a parameter's term has the same bits whatever the partition puts beside it (the gradient
  // norm of training.clip_grad_norm). The CPU adds in element order; CUDA in a fixed tree, which
  // may differ from the CPU in the last bits of the double.
  absl::Status SumSquares(std::span<const Tensor> tensors, Tensor& out) const;

 protected:
  // The backend's kernels, one per entry above, called only with arguments the entry has
  // checked (the same INVALID_ARGUMENT messages on every backend).
  virtual absl::Status DoFill(Tensor& out, double value) const = 0;
  virtual absl::Status DoCopy(const Tensor& in, Tensor& out) const = 0;
  virtual absl::Status DoAdd(const Tensor& a, const Tensor& b, Tensor& out) const = 0;
  virtual absl::Status DoAxpy(float alpha, const Tensor& x, Tensor& y) const = 0;
  virtual absl::Status DoScale(float alpha, Tensor& x) const = 0;
  virtual absl::Status DoCast(const Tensor& in, Tensor& out) const = 0;
  virtual absl::Status DoSumAccumulate(const Tensor& in, int64_t outer, int64_t mid, int64_t inner,
                                       Tensor& out) const = 0;
  virtual absl::Status DoFillRandom(const RandomKey& key, RandomDistribution distribution, double a,
                                    double b, Tensor& out) const = 0;
  virtual absl::Status DoDropoutMask(const RandomKey& key, double p, const Tensor& in,
                                     Tensor& out) const = 0;
  virtual absl::Status DoFlagNonFinite(std::span<const Tensor> tensors, Tensor& flag) const = 0;
  virtual absl::Status DoSumSquares(std::span<const Tensor> tensors, Tensor& out) const = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_OPS_TENSOR_OPS_H_
