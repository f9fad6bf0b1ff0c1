// ScheduleCsv: writes a Program's compute order in PyTorch's pipelining compute-schedule CSV
// format (action_list.h has the grammar): row s is stage s's Forward, Backward, BackwardInput and
// BackwardWeight as `<virtual stage>F<mb>`, B, I, W, comma-separated; transfers, loads and the
// step's end are left out, since CompileCustomProgram derives them. For every built-in training
// schedule, ParseScheduleCsv + CompileCustomProgram of the text gives back the same instruction
// lists. Pure.
#ifndef GPIPE_RUNTIME_SCHEDULE_SCHEDULE_CSV_H_
#define GPIPE_RUNTIME_SCHEDULE_SCHEDULE_CSV_H_

#include <string>

#include "absl/status/statusor.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

// One line per stage, each ending in '\n'. INVALID_ARGUMENT for a forward-only program (it has
// no training order to write).
absl::StatusOr<std::string> ScheduleCsv(const Program& program);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_SCHEDULE_CSV_H_
