// Whole-file reads for the loaders (npy, safetensors): one allocation of the file's size; and
// whole-file atomic writes for outputs that are read while a job runs (traces).
#ifndef GPIPE_RUNTIME_CORE_FILE_IO_H_
#define GPIPE_RUNTIME_CORE_FILE_IO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpipe {

// The file's bytes. NOT_FOUND naming the path when it cannot be opened; DATA_LOSS when the read
// fails part-way.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Writes `contents` to `path` through a temporary file in the same directory renamed into
// place, so a reader never sees half a file. DATA_LOSS naming the path on failure.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_FILE_IO_H_
