// Whole-file reads for the loaders (npy, safetensors): one allocation of the file's size.
#ifndef GPIPE_RUNTIME_CORE_FILE_IO_H_
#define GPIPE_RUNTIME_CORE_FILE_IO_H_

#include <string>

#include "absl/status/statusor.h"

namespace gpipe {

// The file's bytes. NOT_FOUND naming the path when it cannot be opened; DATA_LOSS when the read
// fails part-way.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_FILE_IO_H_
