#include "runtime/data/split_files.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gpipe::dataset_internal {

absl::StatusOr<SplitFiles> ChooseSplitFiles(DataSplit split, SplitFiles train, SplitFiles eval,
                                            const SplitFilesWording& wording) {
  const bool held_out = split == DataSplit::kEval;
  SplitFiles files = held_out ? std::move(eval) : std::move(train);
  if (held_out && files.inputs.empty() && files.targets.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(wording.source, " has no held-out split; set ", files.inputs_field, " and ",
                     files.targets_field));
  }
  const std::string both =
      held_out ? absl::StrCat(" (give both ", wording.eval_name, " files or neither)") : "";
  if (files.inputs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(files.inputs_field, " is required (", wording.inputs_what, ")", both));
  }
  if (files.targets.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(files.targets_field, " is required (", wording.targets_what, ")", both));
  }
  return files;
}

}  // namespace gpipe::dataset_internal
