#include "runtime/device/cpu/cpu_tensor_ops.h"

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
