// AddSkipTransfers: the transfers of the skip connections that cross virtual stages
// (Program::skips), added to a program whose builder placed only the pipeline's own. For each
// route and micro-batch the producer's chunk sends the output right after its Forward and
// receives the gradient right before its input-gradient pass (Backward or BackwardInput); the
// join's chunk receives the output right before its Forward and sends the gradient right after
// its input-gradient pass. Every new wait is for work the pipeline already orders before it (the
// producer's virtual stage comes first, so its Forward precedes the join's, and the join's
// backward precedes the producer's), so no deadlock is added; receives are then reordered where
// one pair of ranks needs them in its send order (receive_order.h). Callers verify the result.
#ifndef GPIPE_RUNTIME_SCHEDULE_SKIP_TRANSFERS_H_
#define GPIPE_RUNTIME_SCHEDULE_SKIP_TRANSFERS_H_

#include <vector>

#include "absl/status/status.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

// Sets program.skips to `routes` and adds their instructions. INVALID_ARGUMENT for a route whose
// virtual stages are out of range or not in pipeline order, or a program that already has skip
// instructions.
absl::Status AddSkipTransfers(std::vector<SkipRoute> routes, Program& program);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_SKIP_TRANSFERS_H_
