// Helpers shared by the Dataset implementations (internal to gpipe_train): the argument checks of
// a Gather call (the output tensor has the right dtype and shape, every index is in range or the
// padding index) and the row loop that writes zeros for padding samples, so every data source
// treats kPaddingSample the same way.
#ifndef GPIPE_RUNTIME_DATA_GATHER_CHECKS_H_
#define GPIPE_RUNTIME_DATA_GATHER_CHECKS_H_

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "runtime/core/dtype.h"
#include "runtime/core/shape.h"
#include "runtime/core/tensor.h"
#include "runtime/data/dataset.h"

namespace gpipe::dataset_internal {

// INVALID_ARGUMENT when `out` is not a host-accessible [indices.size(), per_sample...] tensor of
// `dtype`; OUT_OF_RANGE when an index is outside [0, size) and is not kPaddingSample. `what` is
// "inputs" or "targets"; `dataset` names the data set ("synthetic data", "npy file x.npy").
absl::Status CheckGather(const std::string& dataset, const char* what,
                         std::span<const int64_t> indices, int64_t size, const Shape& per_sample,
                         DType dtype, const Tensor& out);

// Row i of `out` (row_elements values of T each) gets fill_row(indices[i], row) for a sample
// index and zeros for kPaddingSample. Call after CheckGather.
template <typename T, typename FillRow>
void GatherRows(std::span<const int64_t> indices, int64_t row_elements, T* out,
                FillRow&& fill_row) {
  for (size_t i = 0; i < indices.size(); ++i) {
    T* row = out + static_cast<int64_t>(i) * row_elements;
    if (indices[i] == kPaddingSample) {
      std::fill(row, row + row_elements, T{0});
    } else {
      fill_row(indices[i], row);
    }
  }
}

}  // namespace gpipe::dataset_internal

#endif  // GPIPE_RUNTIME_DATA_GATHER_CHECKS_H_
