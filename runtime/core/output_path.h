// Output paths, checked before a run starts so that nothing is lost at its end: every output
// (export, metrics, trace, checkpoints) is a regular file in a writable directory, and only
// regular files are ever replaced (never a device, FIFO, socket or directory).
#ifndef GPIPE_RUNTIME_CORE_OUTPUT_PATH_H_
#define GPIPE_RUNTIME_CORE_OUTPUT_PATH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpipe {

// What kind of file a stat mode describes, for messages: "a directory", "a character device",
// "a FIFO", ...
std::string FileKindName(unsigned mode);

// OK when `path` is absent or a regular file (after following links); FAILED_PRECONDITION
// otherwise, e.g. "/dev/full is a character device; gpipe replaces only regular files".
absl::Status CheckReplaceable(const std::string& path);

// An output file named `what` in messages ("--export", "runtime.metrics_out"): `path` may be
// written (CheckReplaceable) and its directory exists and is writable. INVALID_ARGUMENT or
// FAILED_PRECONDITION naming `what` and the path.
absl::Status CheckOutputFile(absl::string_view what, const std::string& path);

// An output directory: `dir` is a writable directory, or absent with its nearest existing
// ancestor a writable directory (it is created with its missing parents when first written).
// Errors as CheckOutputFile's; a symlink loop is named as one.
absl::Status CheckOutputDirectory(absl::string_view what, const std::string& dir);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_OUTPUT_PATH_H_
