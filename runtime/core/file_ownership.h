// Which files a run owns: the one rule that keeps every output from destroying something the run
// was given or wrote earlier. An output may not be the same file as an input (the plan,
// --init-from, a data file), as another output, or anything inside a kept directory (the
// checkpoint directory, the checkpoint a run resumes from). "The same file" is decided by device
// and inode after following links (so a symlink or a hard link to an input is caught), and, for
// outputs that do not exist yet, by their path with every existing link resolved.
#ifndef GPIPE_RUNTIME_CORE_FILE_OWNERSHIP_H_
#define GPIPE_RUNTIME_CORE_FILE_OWNERSHIP_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace gpipe {

// A path and what it is to the run, as messages name it: "--export", "the plan",
// "data.npy.inputs", "checkpoint.dir".
struct FileRole {
  std::string role;
  std::string path;
};

struct RunFiles {
  std::vector<FileRole> inputs;     // files the run reads
  std::vector<FileRole> kept_dirs;  // directories whose contents the run's outputs never touch
  std::vector<FileRole> outputs;    // files the run writes (empty paths are skipped)
};

// FAILED_PRECONDITION naming both roles and paths when an output is an input, another output, or
// inside a kept directory, e.g. "--export plan.pbtxt is the same file as the plan (plan.pbtxt):
// an output never replaces a file the run reads". Paths that cannot be examined (a symlink loop)
// are reported as such. Inputs and kept directories that do not exist are ignored (their own
// checks report them).
absl::Status CheckRunFiles(const RunFiles& files);

// CheckRunFiles for one output written later in the run (an export asked for by an embedding
// program): against every input, kept directory and output of `files`; an output of `files`
// with the same role and path is this one, checked at start-up, and not compared with itself.
absl::Status CheckLaterOutput(const RunFiles& files, const FileRole& output);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_FILE_OWNERSHIP_H_
