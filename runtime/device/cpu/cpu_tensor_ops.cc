#include "runtime/device/cpu/cpu_tensor_ops.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/rng.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

absl::Status ExpectF32(const char* op, const char* what, const Tensor& t) {
  if (!t.defined() || t.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat("TensorOps::", op, ": ", what, " must be f32, got ", t.DebugString()));
  }
  return absl::OkStatus();
}

absl::Status ExpectSameCount(const char* op, const Tensor& a, const Tensor& b) {
  if (a.num_elements() != b.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("TensorOps::", op, ": ", a.DebugString(),
                                                   " and ", b.DebugString(),
                                                   " differ in element count"));
  }
  return absl::OkStatus();
}

template <typename T>
void FillTyped(T* __restrict out, int64_t n, T value) {
  for (int64_t i = 0; i < n; ++i) out[i] = value;
}

RandomStream StreamOf(const RandomKey& key) {
  RandomStream stream(key.seed, {key.key[0], key.key[1], key.key[2]});
  stream.Seek(key.first_word);
  return stream;
}

}  // namespace

absl::Status CpuTensorOps::Fill(Tensor& out, double value) const {
  if (!out.defined()) return absl::InvalidArgumentError("TensorOps::Fill: undefined output");
  const int64_t n = out.num_elements();
  switch (out.dtype()) {
    case DType::kF32:
      FillTyped(out.data<float>(), n, static_cast<float>(value));
      return absl::OkStatus();
    case DType::kF64:
      FillTyped(out.data<double>(), n, value);
      return absl::OkStatus();
    case DType::kI64:
      FillTyped(out.data<int64_t>(), n, static_cast<int64_t>(value));
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "TensorOps::Fill: f32, f64 or i64 output expected, got ", out.DebugString()));
  }
}

absl::Status CpuTensorOps::Copy(const Tensor& in, Tensor& out) const {
  if (!in.defined() || !out.defined() || in.dtype() != out.dtype() ||
      in.num_elements() != out.num_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TensorOps::Copy: ", in.DebugString(), " into ", out.DebugString()));
  }
  if (in.bytes() > 0 && in.raw_data() != out.raw_data()) {
    std::memmove(out.raw_data(), in.raw_data(), in.bytes());
  }
  return absl::OkStatus();
}

absl::Status CpuTensorOps::Add(const Tensor& a, const Tensor& b, Tensor& out) const {
  RETURN_IF_ERROR(ExpectF32("Add", "a", a));
  RETURN_IF_ERROR(ExpectF32("Add", "b", b));
  RETURN_IF_ERROR(ExpectF32("Add", "out", out));
  RETURN_IF_ERROR(ExpectSameCount("Add", a, b));
  RETURN_IF_ERROR(ExpectSameCount("Add", a, out));
  // No __restrict: out may be a or b. Element-wise, so aliasing cannot change a result.
  const float* x = a.f32();
  const float* y = b.f32();
  float* z = out.f32();
  const int64_t n = out.num_elements();
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
  return absl::OkStatus();
}

absl::Status CpuTensorOps::Axpy(float alpha, const Tensor& x, Tensor& y) const {
  return absl::UnimplementedError("CpuTensorOps::Axpy: scaffolding");
}

absl::Status CpuTensorOps::Scale(float alpha, Tensor& x) const {
  return absl::UnimplementedError("CpuTensorOps::Scale: scaffolding");
}

absl::Status CpuTensorOps::Cast(const Tensor& in, Tensor& out) const {
  return absl::UnimplementedError("CpuTensorOps::Cast: scaffolding");
}

absl::Status CpuTensorOps::SumAccumulate(const Tensor& in, int64_t outer, int64_t mid,
                                         int64_t inner, Tensor& out) const {
  RETURN_IF_ERROR(ExpectF32("SumAccumulate", "in", in));
  RETURN_IF_ERROR(ExpectF32("SumAccumulate", "out", out));
  if (outer < 0 || mid < 0 || inner < 0 || outer * mid * inner != in.num_elements() ||
      out.num_elements() < mid) {
    return absl::InvalidArgumentError(absl::StrCat("TensorOps::SumAccumulate: ", in.DebugString(),
                                                   " viewed as [", outer, ", ", mid, ", ", inner,
                                                   "] into ", out.DebugString()));
  }
  const float* __restrict x = in.f32();
  float* __restrict y = out.f32();
  // Per mid index: a double partial sum over `inner` for each outer index, the partial sums
  // added in outer order, and one float rounding at the end.
  std::vector<double> sum(static_cast<size_t>(mid), 0.0);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t m = 0; m < mid; ++m) {
      const float* row = x + (o * mid + m) * inner;
      double partial = 0.0;
      for (int64_t i = 0; i < inner; ++i) partial += row[i];
      sum[m] += partial;
    }
  }
  for (int64_t m = 0; m < mid; ++m) y[m] += static_cast<float>(sum[m]);
  return absl::OkStatus();
}

absl::Status CpuTensorOps::FillRandom(const RandomKey& key, RandomDistribution distribution,
                                      double a, double b, Tensor& out) const {
  RETURN_IF_ERROR(ExpectF32("FillRandom", "out", out));
  RandomStream stream = StreamOf(key);
  float* __restrict y = out.f32();
  const int64_t n = out.num_elements();
  switch (distribution) {
    case RandomDistribution::kUniform:
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(a + b * stream.NextUniform());
      return absl::OkStatus();
    case RandomDistribution::kNormal:
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(a * stream.NextNormal());
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("TensorOps::FillRandom: unknown distribution");
}

absl::Status CpuTensorOps::DropoutMask(const RandomKey& key, double p, const Tensor& in,
                                       Tensor& out) const {
  RETURN_IF_ERROR(ExpectF32("DropoutMask", "in", in));
  RETURN_IF_ERROR(ExpectF32("DropoutMask", "out", out));
  RETURN_IF_ERROR(ExpectSameCount("DropoutMask", in, out));
  if (!(p >= 0.0 && p < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TensorOps::DropoutMask: p must be in [0, 1), got ", p));
  }
  RandomStream stream = StreamOf(key);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  // No __restrict: out may be in.
  const float* x = in.f32();
  float* y = out.f32();
  const int64_t n = out.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = static_cast<double>(stream.NextUniform()) >= p;
    y[i] = keep ? x[i] * scale : 0.0f;
  }
  return absl::OkStatus();
}

absl::Status CpuTensorOps::FlagNonFinite(std::span<const Tensor> tensors, Tensor& flag) const {
  return absl::UnimplementedError("CpuTensorOps::FlagNonFinite: scaffolding");
}

}  // namespace gpipe
