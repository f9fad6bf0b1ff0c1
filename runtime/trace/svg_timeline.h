// RenderTimelineSvg: a Timeline drawn as the GPipe paper draws a pipeline (figure 2(c)): one
// lane per stage, stage 0 on top, time to the right with a ruler; one box per operation,
// filled by kind (forward, backward, weight gradient; later virtual chunks lighter) and
// labelled with its micro-batch where it is wide enough; idle time stays a light grey lane so
// the bubble is visible; each lane ends with its measured bubble. A title with the run's facts
// and a legend frame it. The output is one self-contained SVG document (no scripts, no external
// fonts or styles); boxes carry class "box" and a hover title. Pure.
#ifndef GPIPE_RUNTIME_TRACE_SVG_TIMELINE_H_
#define GPIPE_RUNTIME_TRACE_SVG_TIMELINE_H_

#include <string>

#include "runtime/trace/timeline.h"

namespace gpipe::trace {

struct SvgTimelineOptions {
  // The time axis is sized so a typical box is wide enough for its label, within these bounds
  // (pixels); beyond them labels give way to bare boxes.
  double min_plot_width = 640;
  double max_plot_width = 1800;
};

std::string RenderTimelineSvg(const Timeline& timeline, const SvgTimelineOptions& options = {});

}  // namespace gpipe::trace

#endif  // GPIPE_RUNTIME_TRACE_SVG_TIMELINE_H_
