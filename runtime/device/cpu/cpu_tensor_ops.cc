#include "runtime/device/cpu/cpu_tensor_ops.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/bf16.h"
#include "runtime/core/rng.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops/op_checks.h"

namespace gpipe {
namespace {

// The exact f32 value of an element: f32 as it is, bf16 (its bits) widened.
inline float ValueOf(float v) { return v; }
inline float ValueOf(uint16_t bits) { return FromBf16(bits); }

// SumAccumulate over f32 or bf16 elements (the same double sums of the same f32 values).
template <typename T>
void SumInto(const T* src, int64_t outer, int64_t mid, int64_t inner, float* dst) {
  std::vector<double> sum(mid, 0.0);
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) {
      const T* row = src + o * mid;
      for (int64_t m = 0; m < mid; ++m) sum[m] += ValueOf(row[m]);
    }
  } else {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t m = 0; m < mid; ++m) {
        const T* run = src + (o * mid + m) * inner;
        double run_sum = 0.0;
        for (int64_t i = 0; i < inner; ++i) run_sum += ValueOf(run[i]);
        sum[m] += run_sum;
      }
    }
  }
  for (int64_t m = 0; m < mid; ++m) dst[m] += static_cast<float>(sum[m]);
}

using op_checks::AtLeast;
using op_checks::DTypeIs;
using op_checks::Elements;

RandomStream StreamOf(const RandomKey& key) {
  RandomStream stream(key.seed, {key.key[0], key.key[1], key.key[2]});
  stream.Seek(key.first_word);
  return stream;
}

}  // namespace

absl::Status CpuTensorOps::DoFill(Tensor& out, double value) const {
  const int64_t n = out.num_elements();
  switch (out.dtype()) {
    case DType::kF32: {
      float* __restrict p = out.data<float>();
      const float v = static_cast<float>(value);
      if (v == 0.0f && !std::signbit(v)) {
        std::memset(p, 0, n * sizeof(float));
      } else {
        for (int64_t i = 0; i < n; ++i) p[i] = v;
      }
      return absl::OkStatus();
    }
    case DType::kF64: {
      double* __restrict p = out.data<double>();
      for (int64_t i = 0; i < n; ++i) p[i] = value;
      return absl::OkStatus();
    }
    case DType::kI64: {
      int64_t* __restrict p = out.data<int64_t>();
      const int64_t v = static_cast<int64_t>(value);
      for (int64_t i = 0; i < n; ++i) p[i] = v;
      return absl::OkStatus();
    }
    case DType::kBF16: {
      auto* __restrict p = static_cast<uint16_t*>(out.raw_data());
      const uint16_t v = ToBf16(static_cast<float>(value));
      for (int64_t i = 0; i < n; ++i) p[i] = v;
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("Fill: unknown dtype of ", out.DebugString()));
}

absl::Status CpuTensorOps::DoCopy(const Tensor& in, Tensor& out) const {
  if (in.raw_data() != out.raw_data() && in.bytes() > 0) {
    std::memmove(out.raw_data(), in.raw_data(), in.bytes());
  }
  return absl::OkStatus();
}

absl::Status CpuTensorOps::DoAdd(const Tensor& a, const Tensor& b, Tensor& out) const {
  const int64_t n = a.num_elements();
  // No __restrict: out may be a or b.
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  for (int64_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i];
  return absl::OkStatus();
}

absl::Status CpuTensorOps::DoAxpy(float alpha, const Tensor& x, Tensor& y) const {
  const int64_t n = x.num_elements();
  const float* px = x.data<float>();
  float* py = y.data<float>();
  for (int64_t i = 0; i < n; ++i) py[i] = py[i] + alpha * px[i];
  return absl::OkStatus();
}

absl::Status CpuTensorOps::DoScale(float alpha, Tensor& x) const {
  float* __restrict p = x.data<float>();
  const int64_t n = x.num_elements();
  for (int64_t i = 0; i < n; ++i) p[i] = p[i] * alpha;
  return absl::OkStatus();
}

absl::Status CpuTensorOps::DoCast(const Tensor& in, Tensor& out) const {
  const int64_t n = in.num_elements();
  const DType from = in.dtype();
  const DType to = out.dtype();
  if (from == to) return Copy(in, out);
  if (from == DType::kF32 && to == DType::kBF16) {
    const float* __restrict src = in.data<float>();
    auto* __restrict dst = static_cast<uint16_t*>(out.raw_data());
    for (int64_t i = 0; i < n; ++i) dst[i] = ToBf16(src[i]);
    return absl::OkStatus();
  }
  if (from == DType::kBF16 && to == DType::kF32) {
    const auto* __restrict src = static_cast<const uint16_t*>(in.raw_data());
    float* __restrict dst = out.data<float>();
    for (int64_t i = 0; i < n; ++i) dst[i] = FromBf16(src[i]);
    return absl::OkStatus();
  }
  if (from == DType::kF32 && to == DType::kF64) {
    const float* __restrict src = in.data<float>();
    double* __restrict dst = out.data<double>();
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
    return absl::OkStatus();
  }
  if (from == DType::kF64 && to == DType::kF32) {
    const double* __restrict src = in.data<double>();
    float* __restrict dst = out.data<float>();
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("Cast: no conversion from ", DTypeName(from), " to ", DTypeName(to)));
}

absl::Status CpuTensorOps::DoSumAccumulate(const Tensor& in, int64_t outer, int64_t mid,
                                           int64_t inner, Tensor& out) const {
  if (in.dtype() == DType::kBF16) {
    SumInto(static_cast<const uint16_t*>(in.raw_data()), outer, mid, inner, out.data<float>());
  } else {
    SumInto(in.data<float>(), outer, mid, inner, out.data<float>());
  }
  return absl::OkStatus();
}

absl::Status CpuTensorOps::DoFillRandom(const RandomKey& key, RandomDistribution distribution,
                                        double a, double b, Tensor& out) const {
  RandomStream stream = StreamOf(key);
  float* __restrict p = out.data<float>();
  const int64_t n = out.num_elements();
  switch (distribution) {
    case RandomDistribution::kUniform:
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(a + b * stream.NextUniform());
      return absl::OkStatus();
    case RandomDistribution::kNormal:
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(a * stream.NextNormal());
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("FillRandom: unknown distribution");
}

absl::Status CpuTensorOps::DoDropoutMask(const RandomKey& key, double p, const Tensor& in,
                                         Tensor& out) const {
  const int64_t n = in.num_elements();
  RandomStream stream = StreamOf(key);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  const float* src = in.data<float>();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = static_cast<double>(stream.NextUniform()) >= p;
    dst[i] = keep ? src[i] * scale : 0.0f;
  }
  return absl::OkStatus();
}

absl::Status CpuTensorOps::DoFlagNonFinite(std::span<const Tensor> tensors, Tensor& flag) const {
  uint32_t non_finite = 0;
  for (const Tensor& t : tensors) {
    // NaN and the infinities are exactly the floats whose exponent bits are all set; an OR of
    // integer tests vectorizes, and reads every element once.
    const auto* __restrict bits = static_cast<const uint32_t*>(t.raw_data());
    const int64_t n = t.num_elements();
    uint32_t any = 0;
    for (int64_t i = 0; i < n; ++i) any |= (bits[i] & 0x7f800000u) == 0x7f800000u;
    non_finite |= any;
  }
  if (non_finite != 0) *flag.data<float>() = 1.0f;
  return absl::OkStatus();
}

absl::Status CpuTensorOps::DoSumSquares(std::span<const Tensor> tensors, Tensor& out) const {
  double* sums = out.data<double>();
  for (size_t t = 0; t < tensors.size(); ++t) {
    // One double accumulator in element order: the host arithmetic clipping used before this op,
    // so CPU gradient norms keep their bits.
    const float* values = tensors[t].data<float>();
    const int64_t n = tensors[t].num_elements();
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      sum += static_cast<double>(values[i]) * static_cast<double>(values[i]);
    }
    sums[t] = sum;
  }
  return absl::OkStatus();
}

}  // namespace gpipe
