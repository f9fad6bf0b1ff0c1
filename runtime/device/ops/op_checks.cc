#include "runtime/device/ops/op_checks.h"

#include "absl/strings/str_cat.h"

namespace gpipe::op_checks {

absl::Status DTypeIs(const char* op, const char* what, const Tensor& t, DType dtype) {
  if (!t.defined() || t.dtype() != dtype) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " must be a ", DTypeName(dtype),
                                                   " tensor, got ", t.DebugString()));
  }
  return absl::OkStatus();
}

absl::Status Elements(const char* op, const char* what, const Tensor& t, DType dtype,
                      int64_t elements) {
  if (absl::Status s = DTypeIs(op, what, t, dtype); !s.ok()) return s;
  if (t.num_elements() != elements) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", what, " ", t.DebugString(), " must have ", elements, " elements"));
  }
  return absl::OkStatus();
}

absl::Status AtLeast(const char* op, const char* what, const Tensor& t, DType dtype,
                     int64_t elements) {
  if (absl::Status s = DTypeIs(op, what, t, dtype); !s.ok()) return s;
  if (t.num_elements() < elements) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " ", t.DebugString(),
                                                   " must have at least ", elements, " elements"));
  }
  return absl::OkStatus();
}

absl::Status NonNegative(const char* op, std::initializer_list<int64_t> counts) {
  for (int64_t c : counts) {
    if (c < 0) return absl::InvalidArgumentError(absl::StrCat(op, ": negative size ", c));
  }
  return absl::OkStatus();
}

absl::Status SquareBlocks(const char* op, const char* what, int64_t blocks, int64_t t,
                          const Tensor& tensor) {
  if (blocks < 0 || t < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": negative blocks (", blocks, ") or t (", t, ")"));
  }
  if (!tensor.defined() || tensor.dtype() != DType::kF32 ||
      tensor.num_elements() != blocks * t * t) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", what, " must be f32 [", blocks, ", ", t, ", ", t, "], got ",
                     tensor.defined() ? tensor.DebugString() : "undefined"));
  }
  return absl::OkStatus();
}

}  // namespace gpipe::op_checks
