// FindExecutable: where execvp would find a program, decided before gpipe-run forks, so that a
// missing launcher (`--launcher srun` with no srun installed) is a usage error with a clear
// message instead of the child's exit code 127.
#ifndef GPIPE_LAUNCHER_EXECUTABLE_LOOKUP_H_
#define GPIPE_LAUNCHER_EXECUTABLE_LOOKUP_H_

#include <string>

#include "absl/status/statusor.h"

namespace gpipe {

// `name` with a slash is taken as a path; otherwise each directory of `path_variable` ($PATH,
// ':'-separated; an empty entry is the working directory) is tried in order. The first regular
// file this process may execute, or NOT_FOUND: "srun: not found on PATH (/usr/bin:/bin)".
absl::StatusOr<std::string> FindExecutable(const std::string& name,
                                           const std::string& path_variable);

}  // namespace gpipe

#endif  // GPIPE_LAUNCHER_EXECUTABLE_LOOKUP_H_
