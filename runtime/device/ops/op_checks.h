// Argument checks shared by every backend's ops, so each backend rejects bad arguments with the
// same INVALID_ARGUMENT message (naming the op and the tensors) before touching memory.
#ifndef GPIPE_RUNTIME_DEVICE_OPS_OP_CHECKS_H_
#define GPIPE_RUNTIME_DEVICE_OPS_OP_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/core/tensor.h"

namespace gpipe::op_checks {

// `t` is defined and holds `dtype`.
absl::Status DTypeIs(const char* op, const char* what, const Tensor& t, DType dtype);
// `t` is defined, holds `dtype` and exactly `elements` elements.
absl::Status Elements(const char* op, const char* what, const Tensor& t, DType dtype,
                      int64_t elements);
// `t` is defined, holds `dtype` and at least `elements` elements.
absl::Status AtLeast(const char* op, const char* what, const Tensor& t, DType dtype,
                     int64_t elements);
// blocks, t >= 0 and `t` (`what`) is a defined f32 tensor of blocks * t * t elements.
absl::Status SquareBlocks(const char* op, const char* what, int64_t blocks, int64_t t,
                          const Tensor& tensor);
// Every count is >= 0.
absl::Status NonNegative(const char* op, std::initializer_list<int64_t> counts);

}  // namespace gpipe::op_checks

#endif  // GPIPE_RUNTIME_DEVICE_OPS_OP_CHECKS_H_
