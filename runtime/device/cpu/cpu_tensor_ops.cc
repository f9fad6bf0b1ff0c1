#include "runtime/device/cpu/cpu_tensor_ops.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gpipe {

absl::Status CpuTensorOps::Fill(Tensor& out, double value) const {
  if (!out.defined()) return absl::InvalidArgumentError("Fill: undefined tensor");
  const int64_t n = out.num_elements();
  switch (out.dtype()) {
    case DType::kF32:
      std::fill(out.data<float>(), out.data<float>() + n, static_cast<float>(value));
      return absl::OkStatus();
    case DType::kF64:
      std::fill(out.data<double>(), out.data<double>() + n, value);
      return absl::OkStatus();
    case DType::kI64:
      std::fill(out.data<int64_t>(), out.data<int64_t>() + n, static_cast<int64_t>(value));
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("Fill: needs an f32, f64 or i64 tensor, got ", out.DebugString()));
  }
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

absl::Status CpuTensorOps::SumAccumulate(const Tensor& in, int64_t outer, int64_t mid, int64_t inner, Tensor& out) const {
  return absl::UnimplementedError("CpuTensorOps::SumAccumulate: scaffolding");
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
