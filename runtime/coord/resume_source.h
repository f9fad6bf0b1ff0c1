// ResolveResume: rank 0's start-up check of --resume: finds the checkpoint (checkpoint_layout.h),
// reads its manifest and checks that the plan can continue from it. Stages, replicas, schedule,
// micro-batches, optimizer hyperparameters and the step count may change; what fixes the data
// position (global batch, seed, shuffling) may not, nor the data itself (its fingerprint). Whether
// the model matches is checked when the ranks load the tensors (CheckpointSession::Restore).
#ifndef GPIPE_RUNTIME_COORD_RESUME_SOURCE_H_
#define GPIPE_RUNTIME_COORD_RESUME_SOURCE_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/control.pb.h"
#include "proto/plan.pb.h"

namespace gpipe {

// `resume`: the flag's value; `plan`: the resolved plan (checkpoint.dir absolute);
// `data_fingerprint`: its data's (data_files.h), refused when the checkpoint records another.
// The result's dir is absolute; its `changes` list every field in which the plan differs from
// the checkpoint's, one line each. Errors name the file or the plan field and both values.
absl::StatusOr<pb::ResumeFrom> ResolveResume(const std::string& resume, const pb::Plan& plan,
                                             const std::string& data_fingerprint);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_RESUME_SOURCE_H_
