#include "runtime/device/cpu/cpu_activation_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "runtime/core/bf16.h"

namespace gpipe {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

// One plain loop per activation and direction, so each vectorizes on its own.
void ReluForward(const float* __restrict x, float* __restrict y, int64_t n) {
  // NaN passes through (as torch.relu), so a diverging run is not masked.
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] <= 0.0f ? 0.0f : x[i];
}

void ReluBackward(const float* __restrict y, const float* __restrict dy, float* __restrict dx,
                  int64_t n) {
  // dy is read unconditionally so the select vectorizes (a load under the condition does not).
  for (int64_t i = 0; i < n; ++i) {
    const float g = dy[i];
    dx[i] = y[i] > 0.0f ? g : 0.0f;
  }
}

void TanhForward(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}

void TanhBackward(const float* __restrict y, const float* __restrict dy, float* __restrict dx,
                  int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

void GeluForward(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 0.5f * (1.0f + std::erf(x[i] * kInvSqrt2));
}

void GeluBackward(const float* __restrict x, const float* __restrict dy, float* __restrict dx,
                  int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float cdf = 0.5f * (1.0f + std::erf(x[i] * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * std::exp(-0.5f * x[i] * x[i]);
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
}

// Operands that are bf16 (mixed precision's storage) run through the same f32 loops a block at a
// time: bf16 inputs widen exactly into a stack block, and a bf16 output is rounded to nearest even
// from one (ToBf16, Cast's rounding).
constexpr int64_t kBlock = 256;

// Elements [begin, begin + count) of `t` as f32: its own floats, or its bf16 values widened into
// `scratch`.
const float* F32Elements(const Tensor& t, int64_t begin, int64_t count, float* scratch) {
  if (t.dtype() == DType::kF32) return t.f32() + begin;
  const auto* bits = static_cast<const uint16_t*>(t.raw_data()) + begin;
  for (int64_t i = 0; i < count; ++i) scratch[i] = FromBf16(bits[i]);
  return scratch;
}

// Where a loop writes elements [begin, ...) of `out`: in place when f32, else `scratch` (then
// StoreElements rounds them into `out`).
float* OutputElements(Tensor& out, int64_t begin, float* scratch) {
  return out.dtype() == DType::kF32 ? out.f32() + begin : scratch;
}

void StoreElements(const float* scratch, Tensor& out, int64_t begin, int64_t count) {
  if (out.dtype() == DType::kF32) return;
  auto* bits = static_cast<uint16_t*>(out.raw_data()) + begin;
  for (int64_t i = 0; i < count; ++i) bits[i] = ToBf16(scratch[i]);
}

// kernel(x, y, n) over f32 or bf16 operands.
template <typename Kernel>
void RunUnary(Kernel kernel, const Tensor& x, Tensor& y) {
  const int64_t n = x.num_elements();
  if (x.dtype() == DType::kF32 && y.dtype() == DType::kF32) return kernel(x.f32(), y.f32(), n);
  float in[kBlock];
  float out[kBlock];
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t count = std::min(kBlock, n - begin);
    kernel(F32Elements(x, begin, count, in), OutputElements(y, begin, out), count);
    StoreElements(out, y, begin, count);
  }
}

// kernel(a, b, out, n) over f32 or bf16 operands (saved, dy -> dx; gate, up -> y).
template <typename Kernel>
void RunBinary(Kernel kernel, const Tensor& saved, const Tensor& dy, Tensor& dx) {
  const int64_t n = dy.num_elements();
  if (saved.dtype() == DType::kF32 && dy.dtype() == DType::kF32 && dx.dtype() == DType::kF32) {
    return kernel(saved.f32(), dy.f32(), dx.f32(), n);
  }
  float a[kBlock];
  float b[kBlock];
  float out[kBlock];
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t count = std::min(kBlock, n - begin);
    kernel(F32Elements(saved, begin, count, a), F32Elements(dy, begin, count, b),
           OutputElements(dx, begin, out), count);
    StoreElements(out, dx, begin, count);
  }
}

// silu(g) = g / (1 + exp(-g)): torch's formula, so the forward matches it bit for bit where
// exp does.
inline float Sigmoid(float g) { return 1.0f / (1.0f + std::exp(-g)); }

void SwiGluForwardLoop(const float* __restrict g, const float* __restrict u, float* __restrict out,
                       int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void SwiGluBackwardLoop(const float* __restrict g, const float* __restrict u,
                        const float* __restrict grad, float* __restrict dg, float* __restrict du,
                        int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = Sigmoid(g[i]);
    dg[i] = grad[i] * u[i] * (s * (1.0f + g[i] * (1.0f - s)));
    du[i] = grad[i] * (g[i] / (1.0f + std::exp(-g[i])));
  }
}

}  // namespace

absl::Status CpuActivationOps::DoSwiGluForward(const Tensor& gate, const Tensor& up,
                                               Tensor& y) const {
  RunBinary(SwiGluForwardLoop, gate, up, y);
  return absl::OkStatus();
}

absl::Status CpuActivationOps::DoSwiGluBackward(const Tensor& gate, const Tensor& up,
                                                const Tensor& dy, Tensor& dgate,
                                                Tensor& dup) const {
  const int64_t n = gate.num_elements();
  const bool all_f32 = gate.dtype() == DType::kF32 && up.dtype() == DType::kF32 &&
                       dy.dtype() == DType::kF32 && dgate.dtype() == DType::kF32 &&
                       dup.dtype() == DType::kF32;
  if (all_f32) {
    SwiGluBackwardLoop(gate.f32(), up.f32(), dy.f32(), dgate.f32(), dup.f32(), n);
    return absl::OkStatus();
  }
  float g[kBlock], u[kBlock], grad[kBlock], dg[kBlock], du[kBlock];
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t count = std::min(kBlock, n - begin);
    SwiGluBackwardLoop(F32Elements(gate, begin, count, g), F32Elements(up, begin, count, u),
                       F32Elements(dy, begin, count, grad), OutputElements(dgate, begin, dg),
                       OutputElements(dup, begin, du), count);
    StoreElements(dg, dgate, begin, count);
    StoreElements(du, dup, begin, count);
  }
  return absl::OkStatus();
}

absl::Status CpuActivationOps::DoForward(Activation activation, const Tensor& x, Tensor& y) const {
  switch (activation) {
    case Activation::kRelu:
      RunUnary(ReluForward, x, y);
      return absl::OkStatus();
    case Activation::kTanh:
      RunUnary(TanhForward, x, y);
      return absl::OkStatus();
    case Activation::kGelu:
      RunUnary(GeluForward, x, y);
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("ActivationOps::Forward: unknown activation");
}

absl::Status CpuActivationOps::DoBackward(Activation activation, const Tensor& saved,
                                          const Tensor& dy, Tensor& dx) const {
  switch (activation) {
    case Activation::kRelu:
      RunBinary(ReluBackward, saved, dy, dx);
      return absl::OkStatus();
    case Activation::kTanh:
      RunBinary(TanhBackward, saved, dy, dx);
      return absl::OkStatus();
    case Activation::kGelu:
      RunBinary(GeluBackward, saved, dy, dx);
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("ActivationOps::Backward: unknown activation");
}

}  // namespace gpipe
