#include "runtime/device/cpu/cpu_tensor_ops.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace gpipe {

absl::Status CpuTensorOps::Fill(Tensor& out, double value) const {
  return absl::UnimplementedError("CpuTensorOps::Fill: scaffolding");
}

absl::Status CpuTensorOps::Copy(const Tensor& in, Tensor& out) const {
  return absl::UnimplementedError("CpuTensorOps::Copy: scaffolding");
}

absl::Status CpuTensorOps::Add(const Tensor& a, const Tensor& b, Tensor& out) const {
  return absl::UnimplementedError("CpuTensorOps::Add: scaffolding");
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

// Implemented ahead of the rest of TensorOps (helper H1, for the dense bias gradient); the
// order is the contract's: double over i within each o, those partials over o in order.
absl::Status CpuTensorOps::SumAccumulate(const Tensor& in, int64_t outer, int64_t mid,
                                         int64_t inner, Tensor& out) const {
  if (outer < 0 || mid < 0 || inner < 0 || !in.defined() || in.dtype() != DType::kF32 ||
      in.num_elements() != outer * mid * inner || !out.defined() || out.dtype() != DType::kF32 ||
      out.num_elements() < mid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CpuTensorOps::SumAccumulate: in must be f32 [", outer, ", ", mid, ", ", inner,
        "] and out f32 with >= ", mid, " elements, got in ",
        in.defined() ? in.DebugString() : "undefined", ", out ",
        out.defined() ? out.DebugString() : "undefined"));
  }
  const float* src = in.data<float>();
  std::vector<double> total(mid, 0.0);
  for (int64_t o = 0; o < outer; ++o) {
    const float* __restrict block = src + o * mid * inner;
    for (int64_t m = 0; m < mid; ++m) {
      double part = 0.0;
      for (int64_t i = 0; i < inner; ++i) part += block[m * inner + i];
      total[m] += part;
    }
  }
  float* __restrict dst = out.data<float>();
  for (int64_t m = 0; m < mid; ++m) dst[m] += static_cast<float>(total[m]);
  return absl::OkStatus();
}

absl::Status CpuTensorOps::FillRandom(const RandomKey& key, RandomDistribution distribution, double a, double b, Tensor& out) const {
  return absl::UnimplementedError("CpuTensorOps::FillRandom: scaffolding");
}

absl::Status CpuTensorOps::DropoutMask(const RandomKey& key, double p, const Tensor& in, Tensor& out) const {
  return absl::UnimplementedError("CpuTensorOps::DropoutMask: scaffolding");
}

absl::Status CpuTensorOps::FlagNonFinite(std::span<const Tensor> tensors, Tensor& flag) const {
  return absl::UnimplementedError("CpuTensorOps::FlagNonFinite: scaffolding");
}

}  // namespace gpipe
