// Checking, before training starts, that checkpoints can be saved in a directory, by doing what a
// save does there on a throw-away file: a run that cannot save learns it at step 0, not hours in.
#ifndef GPIPE_RUNTIME_CKPT_CHECKPOINT_PROBE_H_
#define GPIPE_RUNTIME_CKPT_CHECKPOINT_PROBE_H_

#include <string>

#include "absl/status/status.h"

namespace gpipe {

// Creates `dir` when missing (with its parents, like mkdir -p), then in it: creates a uniquely
// named file (.probe.<pid>.<random>), writes a byte to it, fsyncs it, renames it, fsyncs the
// directory and removes it. FAILED_PRECONDITION "checkpoint.dir <dir>: cannot <step> (<strerror>)"
// naming the first step that failed. Whatever it made is removed, on failure too.
absl::Status ProbeCheckpointDirectory(const std::string& dir);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_CHECKPOINT_PROBE_H_
