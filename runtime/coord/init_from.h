// --init-from: a Hugging Face style checkpoint (runtime/ckpt/hf_checkpoint.h) as the initial
// parameters. Rank 0 checks the file against the plan by name and shape before any rank starts
// (CheckInitFrom); each stage then reads only its own tensors (ReadInitialTensors).
#ifndef GPIPE_RUNTIME_COORD_INIT_FROM_H_
#define GPIPE_RUNTIME_COORD_INIT_FROM_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/control.pb.h"
#include "runtime/ckpt/hf_checkpoint.h"
#include "runtime/plan/analyzed_plan.h"

namespace gpipe {

// Nothing is ignored: INVALID_ARGUMENT naming the tensor and its file for a tensor that is no
// parameter or buffer of the plan, or whose shape differs from the plan's (both shapes);
// NOT_FOUND naming the parameter for one the file lacks, unless another parameter it is tied to
// (model.ties) is there (Hugging Face saves a tied head once, under the embedding's name).
absl::Status CheckInitFrom(const HfCheckpoint& checkpoint, const AnalyzedPlan& plan);

// The checkpoint's values of `names`, each under its own name; a name the file lacks takes the
// values of the first member of its tie group that the file holds.
absl::StatusOr<std::vector<NamedTensorData>> ReadInitialTensors(
    const HfCheckpoint& checkpoint, const std::vector<std::string>& names,
    const std::vector<pb::TieGroup>& ties);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_INIT_FROM_H_
