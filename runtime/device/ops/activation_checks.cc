#include "runtime/device/ops/activation_checks.h"

#include "absl/strings/str_cat.h"

namespace gpipe::op_checks {

const char* ActivationName(Activation activation) {
  switch (activation) {
    case Activation::kRelu:
      return "relu";
    case Activation::kTanh:
      return "tanh";
    case Activation::kGelu:
      return "gelu";
  }
  return "unknown activation";
}

absl::Status KnownActivation(const char* op, Activation activation) {
  switch (activation) {
    case Activation::kRelu:
    case Activation::kTanh:
    case Activation::kGelu:
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("ActivationOps::", op, ": unknown activation ",
                                                 static_cast<int>(activation),
                                                 " (relu, tanh or gelu)"));
}

namespace {

bool F32OrBf16(const Tensor& t) {
  return t.defined() && (t.dtype() == DType::kF32 || t.dtype() == DType::kBF16);
}

}  // namespace

absl::Status ActivationPair(const char* op, Activation activation, const char* a_name,
                            const Tensor& a, const char* b_name, const Tensor& b) {
  if (!F32OrBf16(a) || !F32OrBf16(b) || a.num_elements() != b.num_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ActivationOps::", op, " (", ActivationName(activation), "): ", a_name, " ",
                     a.DebugString(), " and ", b_name, " ", b.DebugString(),
                     " must be f32 or bf16 with the same element count"));
  }
  return absl::OkStatus();
}

}  // namespace gpipe::op_checks
