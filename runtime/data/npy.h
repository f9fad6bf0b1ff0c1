// NumPy .npy files: reading (format versions 1.0, 2.0 and 3.0; C order; little-endian '<f4',
// '<i8', and '<i4' widened to int64) and writing (version 1.0, '<f4' or '<i8'). Every error
// names the file and what is wrong with it. Arrays are read whole into host memory.
#ifndef GPIPE_RUNTIME_DATA_NPY_H_
#define GPIPE_RUNTIME_DATA_NPY_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/dtype.h"
#include "runtime/core/shape.h"

namespace gpipe {

struct NpyArray {
  Shape shape;
  DType dtype = DType::kF32;  // kF32 for '<f4'; kI64 for '<i8' and '<i4'
  std::vector<float> f32;     // the elements when dtype == kF32 (C order)
  std::vector<int64_t> i64;   // the elements when dtype == kI64 (C order)
};

// Reads a whole .npy file. NOT_FOUND when it cannot be opened; INVALID_ARGUMENT for a bad magic
// string, header, dtype, fortran_order, a truncated file or bytes after the array.
absl::StatusOr<NpyArray> ReadNpy(const std::string& path);
// Parses the bytes of a .npy file; `source` names it in messages (usually the path).
absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, const std::string& source);

// Writes a version 1.0 file (header padded to a multiple of 64 bytes, as numpy does).
// `values` must hold shape.num_elements() elements.
absl::Status WriteNpy(const std::string& path, const Shape& shape, std::span<const float> values);
absl::Status WriteNpy(const std::string& path, const Shape& shape, std::span<const int64_t> values);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DATA_NPY_H_
