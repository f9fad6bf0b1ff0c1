// TraceSession: a worker's part in runtime.trace. It owns the rank's TraceRecorder, aligns the
// ranks' clocks at start-up (rank 0 pings every rank over the control channel and keeps the
// round trip that was shortest: Cristian's algorithm; the rank learns its offset too), and at
// the end gathers every rank's events to rank 0, which writes the merged Chrome/Perfetto trace.
// A run that fails still leaves a trace: each failing rank writes its part beside the trace
// file (`<trace>.rank<R>.pb`, no MPI needed), and rank 0 merges the parts that arrive within a
// short wait with its own, lists the ranks it never heard from, and records the error. Every
// rank also appends its events at each step boundary to `<trace>.rank<R>.steps.pb`
// (trace_parts.h): what is left of a rank killed by a signal, merged by rank 0 or gpipe-run.
#ifndef GPIPE_RUNTIME_COORD_TRACE_SESSION_H_
#define GPIPE_RUNTIME_COORD_TRACE_SESSION_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/control.pb.h"
#include "runtime/comm/control_channel.h"
#include "runtime/trace/chrome_trace.h"
#include "runtime/trace/trace_recorder.h"

namespace gpipe {

class TraceSession {
 public:
  // Null when the resolved plan asks for no trace.
  static std::unique_ptr<TraceSession> Create(const pb::Setup& setup, int rank, int world_size);
  // Rank 0, before it sends the setups: removes the parts a previous failed run left at `path`,
  // so that every part found later is this run's.
  static void RemoveStaleParts(const std::string& path, int world_size);

  TraceRecorder* recorder() { return &recorder_; }
  const std::string& path() const { return path_; }
  bool finished() const { return finished_; }

  // Collective, right after the setup: estimates this rank's clock offset to rank 0.
  absl::Status AlignClocks(ControlChannel& control, absl::Time deadline, int rounds = 16);
  // Collective, at the end of a run that succeeded: rank 0 gathers and writes the trace.
  absl::Status Finish(ControlChannel& control, absl::Time deadline);
  // After this rank failed with `error` (or saw another rank abort). Ranks != 0 write their
  // part; rank 0 waits up to `wait` for the other ranks' parts, writes the trace, and then
  // removes the parts it merged.
  absl::Status FinishAfterFailure(const std::string& error, absl::Duration wait);
  // Ranks != 0, after FinishAfterFailure: waits until rank 0 has merged this rank's part (the
  // part is gone) or `wait` passes, so that mpirun does not end the job, rank 0 included,
  // before the trace is written. Returns whether the part was merged.
  bool AwaitMerge(absl::Duration wait) const;

  // At a step (or evaluation batch) boundary: appends the events recorded since the last call
  // to this rank's progress file. Best effort: after a failed write it writes no more.
  void SaveProgress();

  // "<trace>.rank<R>.pb"
  std::string PartPath(int rank) const;
  // Rank 0, after Finish: per rank, the boundary transfers' bytes and the fraction of their
  // time in flight the compute hid (FormatTransferOverlap).
  const std::string& transfer_overlap() const { return transfer_overlap_; }

 private:
  TraceSession(std::string path, TraceRunInfo info, int rank, int stage, int replica, int steps);
  pb::RankTrace OwnTrace(const std::string& error) const;

  std::string path_;
  TraceRunInfo info_;
  int rank_;
  int stage_;
  int replica_;
  TraceRecorder recorder_;
  int64_t offset_ns_ = 0;
  int64_t uncertainty_ns_ = 0;
  bool finished_ = false;
  std::string transfer_overlap_;
  size_t saved_events_ = 0;      // events already in the progress file
  bool saving_progress_ = true;  // false after a write failed
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_TRACE_SESSION_H_
