// SplitFiles: the pair of files (samples, and their labels or targets) that one split of a
// file-backed data set (npy, IDX) reads, with the plan fields naming them, and the one rule for
// choosing and requiring them: the held-out split needs both of its files or is absent, the
// training split needs both. Internal to gpipe_train.
#ifndef GPIPE_RUNTIME_DATA_SPLIT_FILES_H_
#define GPIPE_RUNTIME_DATA_SPLIT_FILES_H_

#include <string>

#include "absl/status/statusor.h"
#include "runtime/data/dataset.h"

namespace gpipe::dataset_internal {

struct SplitFiles {
  const char* inputs_field;   // "data.npy.inputs", "data.idx.train_images"
  const char* targets_field;  // "data.npy.targets", "data.idx.train_labels"
  std::string inputs;         // the paths the plan gives (empty when unset)
  std::string targets;
};

// How the messages about a data source's files read.
struct SplitFilesWording {
  const char* source;        // "data.npy"
  const char* eval_name;     // "eval": what the held-out files are called ("test")
  const char* inputs_what;   // "a float32 .npy file": what the inputs file holds
  const char* targets_what;  // "a .npy file of targets"
};

// `train` or `eval`, whichever `split` reads. FAILED_PRECONDITION when the eval split is asked
// for and neither eval file is set (the data set has no held-out split); INVALID_ARGUMENT
// naming the field when one file of the chosen pair is missing.
absl::StatusOr<SplitFiles> ChooseSplitFiles(DataSplit split, SplitFiles train, SplitFiles eval,
                                            const SplitFilesWording& wording);

}  // namespace gpipe::dataset_internal

#endif  // GPIPE_RUNTIME_DATA_SPLIT_FILES_H_
