// StepScope: what every part of one step's execution on a stage shares: where it runs (for
// messages), the step command, the deadline of each wait, the instruction being executed, and
// the trace it records into. Single-threaded; lives for one step.
#ifndef GPIPE_RUNTIME_EXEC_STEP_SCOPE_H_
#define GPIPE_RUNTIME_EXEC_STEP_SCOPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "proto/control.pb.h"
#include "runtime/comm/data_channel.h"
#include "runtime/exec/executor_config.h"
#include "runtime/schedule/instruction.h"
#include "runtime/trace/trace_recorder.h"

namespace gpipe {

class StepScope {
 public:
  StepScope(const ExecutorConfig& config, const pb::StepCommand& command, TraceRecorder* trace)
      : config_(config), command_(command), trace_(trace) {}

  const ExecutorConfig& config() const { return config_; }
  const pb::StepCommand& command() const { return command_; }
  TraceRecorder* trace() const { return trace_; }

  // "rank 1, stage 1, step 7: " ("rank 3, stage 1, replica 1, step 7: " with data
  // parallelism), the prefix of every error of the step.
  std::string Where() const;
  // When a wait started now must give up.
  absl::Time Deadline() const { return absl::Now() + config_.wait_timeout; }

  // The position of the instruction being executed in the stage program.
  size_t position() const { return position_; }
  void set_position(size_t position) { position_ = position; }

  // Whether this step is recorded, and events stamped with it.
  bool Traced() const;
  TraceEvent EventAt(TraceKind kind) const;
  // The span `instruction` gets as a whole (with its micro-batch, chunk and peer); nullopt for
  // OptimizerStep and ReportEval, which record their parts (the barrier, the update) themselves.
  std::optional<TraceEvent> InstructionEvent(const schedule::Instruction& instruction) const;
  // The trace clock (0 when untraced).
  int64_t TraceNow() const { return trace_ != nullptr ? trace_->NowNs() : 0; }
  // A transfer from its post (posted_ns) until done_ns, or now when done_ns < 0. `chunk`: this
  // stage's chunk (a send's key names the receiver's).
  void RecordTransfer(TraceKind kind, const TransferKey& key, int chunk, int peer, int64_t bytes,
                      int64_t posted_ns, int64_t done_ns = -1) const;

 private:
  const ExecutorConfig& config_;
  const pb::StepCommand& command_;
  TraceRecorder* trace_;
  size_t position_ = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_STEP_SCOPE_H_
