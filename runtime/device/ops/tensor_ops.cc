#include "runtime/device/ops/tensor_ops.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops/op_checks.h"

namespace gpipe {

using op_checks::AtLeast;
using op_checks::DTypeIs;
using op_checks::Elements;

absl::Status TensorOps::Fill(Tensor& out, double value) const {
  if (!out.defined()) return absl::InvalidArgumentError("Fill: undefined tensor");
  return DoFill(out, value);
}

absl::Status TensorOps::Copy(const Tensor& in, Tensor& out) const {
  if (!in.defined() || !out.defined() || in.dtype() != out.dtype() ||
      in.num_elements() != out.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("Copy: ", in.DebugString(), " into ",
                                                   out.DebugString(),
                                                   " (dtype and element count must match)"));
  }
  return DoCopy(in, out);
}

absl::Status TensorOps::Add(const Tensor& a, const Tensor& b, Tensor& out) const {
  const int64_t n = a.num_elements();
  RETURN_IF_ERROR(DTypeIs("Add", "a", a, DType::kF32));
  RETURN_IF_ERROR(Elements("Add", "b", b, DType::kF32, n));
  RETURN_IF_ERROR(Elements("Add", "out", out, DType::kF32, n));
  return DoAdd(a, b, out);
}

absl::Status TensorOps::Axpy(float alpha, const Tensor& x, Tensor& y) const {
  RETURN_IF_ERROR(DTypeIs("Axpy", "x", x, DType::kF32));
  RETURN_IF_ERROR(Elements("Axpy", "y", y, DType::kF32, x.num_elements()));
  return DoAxpy(alpha, x, y);
}

absl::Status TensorOps::Scale(float alpha, Tensor& x) const {
  RETURN_IF_ERROR(DTypeIs("Scale", "x", x, DType::kF32));
  return DoScale(alpha, x);
}

absl::Status TensorOps::Cast(const Tensor& in, Tensor& out) const {
  if (!in.defined() || !out.defined() || in.num_elements() != out.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Cast: ", in.DebugString(), " into ", out.DebugString(), " (element counts must match)"));
  }
  return DoCast(in, out);
}

absl::Status TensorOps::SumAccumulate(const Tensor& in, int64_t outer, int64_t mid, int64_t inner,
                                      Tensor& out) const {
  RETURN_IF_ERROR(op_checks::NonNegative("SumAccumulate", {outer, mid, inner}));
  RETURN_IF_ERROR(Elements("SumAccumulate", "in", in,
                           in.defined() && in.dtype() == DType::kBF16 ? DType::kBF16 : DType::kF32,
                           outer * mid * inner));
  RETURN_IF_ERROR(AtLeast("SumAccumulate", "out", out, DType::kF32, mid));
  return DoSumAccumulate(in, outer, mid, inner, out);
}

absl::Status TensorOps::FillRandom(const RandomKey& key, RandomDistribution distribution, double a,
                                   double b, Tensor& out) const {
  RETURN_IF_ERROR(DTypeIs("FillRandom", "out", out, DType::kF32));
  if (!std::isfinite(a) || !std::isfinite(b)) {
    return absl::InvalidArgumentError(
        absl::StrCat("FillRandom: parameters must be finite, got ", a, " and ", b));
  }
  return DoFillRandom(key, distribution, a, b, out);
}

absl::Status TensorOps::DropoutMask(const RandomKey& key, double p, const Tensor& in,
                                    Tensor& out) const {
  RETURN_IF_ERROR(DTypeIs("DropoutMask", "in", in, DType::kF32));
  RETURN_IF_ERROR(Elements("DropoutMask", "out", out, DType::kF32, in.num_elements()));
  if (!(p >= 0.0 && p < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("DropoutMask: p must be in [0, 1), got ", p));
  }
  return DoDropoutMask(key, p, in, out);
}

absl::Status TensorOps::FlagNonFinite(std::span<const Tensor> tensors, Tensor& flag) const {
  RETURN_IF_ERROR(Elements("FlagNonFinite", "flag", flag, DType::kF32, 1));
  for (const Tensor& t : tensors) {
    RETURN_IF_ERROR(DTypeIs("FlagNonFinite", "tensor", t, DType::kF32));
  }
  return DoFlagNonFinite(tensors, flag);
}

absl::Status TensorOps::SumSquares(std::span<const Tensor> tensors, Tensor& out) const {
  RETURN_IF_ERROR(
      Elements("SumSquares", "out", out, DType::kF64, static_cast<int64_t>(tensors.size())));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string what = absl::StrCat("tensors[", i, "]");
    RETURN_IF_ERROR(DTypeIs("SumSquares", what.c_str(), tensors[i], DType::kF32));
  }
  return DoSumSquares(tensors, out);
}

}  // namespace gpipe
