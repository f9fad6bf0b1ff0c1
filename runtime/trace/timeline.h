// A Timeline is the GPipe paper's picture of one pipeline step, as data: one row per stage (or
// per rank when stages have data-parallel replicas), one box per compute operation, the time
// window of the step, and each row's busy time and bubble. It is neutral between where it came
// from (a measured trace, timeline_from_trace.h, or the schedule simulator,
// timeline_from_simulation.h) and how it is drawn (svg_timeline.h), so a measured step and a
// predicted one are drawn, and their bubbles computed, the same way. Plain values; pure.
#ifndef GPIPE_RUNTIME_TRACE_TIMELINE_H_
#define GPIPE_RUNTIME_TRACE_TIMELINE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpipe::trace {

// What a box computes. The first four are the pipeline's work and count as busy; kOther
// (loading a micro-batch, the optimizer update, the gradient all-reduce) is drawn but is not.
enum class BoxKind { kForward, kBackward, kBackwardInput, kBackwardWeight, kOther };

// "forward", "backward", "backward-input", "backward-weight", "other".
const char* BoxKindName(BoxKind kind);
bool CountsAsBusy(BoxKind kind);

struct TimelineBox {
  int row = 0;
  double begin = 0;  // in the timeline's unit, on the same axis as the window
  double end = 0;
  BoxKind kind = BoxKind::kOther;
  int micro_batch = -1;  // -1 for step-level work (optimizer, all-reduce)
  int chunk = 0;         // virtual chunk (interleaved schedules)
  std::string name;      // as the source names it: "F3", "B3.1", "load 3", "optimizer"
};

struct TimelineRow {
  std::string label;  // "stage 2", or "stage 2, replica 1" when rows are ranks
  int stage = 0;
  int replica = 0;
  int rank = -1;         // -1 for simulations
  bool has_data = true;  // false: the source holds nothing for this row (a missing rank)
  double busy = 0;       // compute time inside the window (overlaps counted once)
  double bubble = 0;     // 1 - busy / window length
};

enum class TimeUnit { kMilliseconds, kSimulated };

struct Timeline {
  // Title facts; empty / 0 when the source does not say.
  std::string plan;
  std::string schedule;  // "GPIPE", "INTERLEAVED_1F1B"
  std::string remat;
  std::string device;
  int stages = 0;               // K
  int micro_batches = 0;        // M
  int chunks = 1;               // v
  std::optional<int64_t> step;  // the training step drawn (traces)
  // Simulations: the simulator's own bubble (mean over stages), to set beside the measured one.
  std::optional<double> predicted_bubble;
  // Things a reader of the picture must know: missing ranks, a failed run, a rank that did
  // not finish the step.
  std::vector<std::string> notes;

  // True for a schedule simulation (a prediction), false for a measured trace.
  bool simulated = false;
  TimeUnit unit = TimeUnit::kMilliseconds;
  // What one unit is, when that is not obvious: "1 unit = a mean stage's forward".
  std::string unit_note;
  double window_begin = 0;
  double window_end = 0;
  std::vector<TimelineRow> rows;
  std::vector<TimelineBox> boxes;

  double window() const { return window_end - window_begin; }
  // Mean bubble over the rows that have data (0 when none has).
  double MeanBubble() const;
};

// Fills each row's busy and bubble from the boxes and the window: busy is the length of the
// union of the row's forward/backward boxes clipped to the window.
void MeasureRows(Timeline& timeline);

// "ms" or "time units".
const char* TimeUnitName(TimeUnit unit);

// One line per row: "stage 1: busy 3.21 ms of 7.13 ms, bubble 55.0%" ("no data" for rows
// without any), as `gpipe-plan timeline` prints them.
std::string FormatRowSummary(const Timeline& timeline);

}  // namespace gpipe::trace

#endif  // GPIPE_RUNTIME_TRACE_TIMELINE_H_
