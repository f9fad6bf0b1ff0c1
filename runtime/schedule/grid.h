// DrawGrid: a schedule as text, drawn like figure 2 of the GPipe paper. Rows are stages,
// columns time slots; a cell shows what the stage computes in that slot (F3 = forward of
// micro-batch 3, B3 = backward) or '.' when it is idle. A header, a time ruler, a legend and
// the predicted bubble per stage and overall come with it. Grid rows fit in max_columns: when
// labelled cells do not fit, cells become single letters, then one column covers several
// time units (the prose lines are about 100 columns). Pure; the inputs are a Program and the
// VerifyResult VerifyProgram gave for it.
#ifndef GPIPE_RUNTIME_SCHEDULE_GRID_H_
#define GPIPE_RUNTIME_SCHEDULE_GRID_H_

#include <string>

#include "runtime/schedule/program.h"
#include "runtime/schedule/verifier.h"

namespace gpipe::schedule {

std::string DrawGrid(const Program& program, const VerifyResult& result, int max_columns = 120);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_GRID_H_
