// Tied parameters (one tensor of the model used in two places, such as a language model's
// embedding and output projection): before each update the gradients of every tie group this
// rank holds a member of are summed over its members, here and between the group's ranks, and
// the sum is given to every member, so the identical updates keep tied parameters equal. The
// members are resolved to slots once at set-up (StageReduceGroups), never searched by name per
// step.
#ifndef GPIPE_RUNTIME_EXEC_TIED_GRADIENTS_H_
#define GPIPE_RUNTIME_EXEC_TIED_GRADIENTS_H_

#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/comm/data_channel.h"
#include "runtime/device/device.h"
#include "runtime/exec/stage_chunks.h"

namespace gpipe {

// One tie group with members on this rank.
struct TiedGradientSum {
  std::vector<ParameterSlot> members;  // this rank's members, in the tie's member order
  // The tie's ranks, summing one tensor of a member's elements; null when this rank holds the
  // whole tie (the group then has one rank).
  ReduceGroup* group = nullptr;
  // "summing the gradients of tied parameters a, b over ranks [0, 3]", for errors.
  std::string what;
};

// Sums `tie`'s gradients: the members' in member order, then over the group's ranks (waiting
// until `deadline`), and copies the sum into every member. With two members a + b == b + a
// exactly: one stage or two agree.
absl::Status SumTiedGradients(const TiedGradientSum& tie, std::span<const ChunkRefs> chunks,
                              Device& device, absl::Time deadline);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_TIED_GRADIENTS_H_
