// Argument checks shared by the Dataset implementations (internal to gpipe_train): the output
// tensor of a Gather call has the right dtype and shape, and every index is in range.
#ifndef GPIPE_RUNTIME_TRAIN_GATHER_CHECKS_H_
#define GPIPE_RUNTIME_TRAIN_GATHER_CHECKS_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "runtime/core/dtype.h"
#include "runtime/core/shape.h"
#include "runtime/core/tensor.h"

namespace gpipe::dataset_internal {

// INVALID_ARGUMENT when `out` is not a host-accessible [indices.size(), per_sample...] tensor of
// `dtype`; OUT_OF_RANGE when an index is outside [0, size). `what` is "inputs" or "targets";
// `dataset` names the data set ("synthetic data", "npy file x.npy").
absl::Status CheckGather(const std::string& dataset, const char* what,
                         std::span<const int64_t> indices, int64_t size, const Shape& per_sample,
                         DType dtype, const Tensor& out);

}  // namespace gpipe::dataset_internal

#endif  // GPIPE_RUNTIME_TRAIN_GATHER_CHECKS_H_
