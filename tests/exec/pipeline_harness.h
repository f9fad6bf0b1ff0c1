// The in-process pipeline the exec tests drive: K stages on K threads running StageExecutor
// over a loopback channel, on the small model of kPlan (overridable), returning weights,
// per-stage memory peaks and reports. No MPI.
#ifndef GPIPE_TESTS_EXEC_PIPELINE_HARNESS_H_
#define GPIPE_TESTS_EXEC_PIPELINE_HARNESS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/control.pb.h"
#include "runtime/exec/stage_chunks.h"
#include "runtime/schedule/program.h"
#include "tests/exec/loopback_channel.h"

namespace gpipe::testing {

// 7 layers (linear, gelu, dropout, linear, layer_norm, tanh, linear), softmax cross-entropy,
// 1 stage, 4 micro-batches of 4 samples, SGD with momentum, 3 steps.
extern const char kPlan[];

struct PipelineRun {
  std::map<std::string, std::vector<float>> weights;          // after training
  std::map<std::string, std::vector<float>> initial_weights;  // before the first step
  std::vector<absl::Status> statuses;                         // per stage
  std::vector<int64_t> peak_activation;                       // per stage, bytes (kActivation)
  std::vector<int64_t> peak_boundary;                         // per stage, bytes (kBoundary)
  std::vector<int64_t> peak_boundary_grad;                    // per stage, bytes (kBoundaryGrad)
  double eval_loss = -1;  // the EVAL pass (when asked for): mean loss per sample, last stage
  // Per stage: activation + boundary + boundary_grad bytes after the run.
  std::vector<int64_t> end_transient;
  std::vector<int64_t> end_boundary;       // per stage, kBoundary bytes after the run
  std::vector<int64_t> end_boundary_grad;  // per stage, kBoundaryGrad bytes after the run
  std::vector<pb::StepReport> last_reports;
};

struct RunOptions {
  int stages = 1;
  // The plan text; null for kPlan (an MLP on synthetic data).
  const char* plan = nullptr;
  std::vector<std::string> overrides;
  LoopbackChannel::FaultHook fault;
  // Transfers matched as NCCL matches them (issue_order_channel.h) instead of by key; `fault`
  // is then unused.
  bool match_in_issue_order = false;
  bool poison_input = false;  // make sample inputs non-finite on the first stage
  // When set: the class id the second target of every micro-batch is replaced by.
  std::optional<int64_t> bad_class_id;
  double wait_seconds = 20;
  bool eval_after = false;   // run one EVAL step (forward only) after training
  bool eval_before = false;  // run one EVAL step before training (initial weights)
  // Edits the built program before it runs (to feed the executor programs the verifier would
  // reject).
  std::function<void(schedule::Program&)> edit_program;
  // Adapts every chunk after it is built (StageChunks::Create's adapter); null: none.
  ChunkAdapter adapter;
};

// Runs the plan (options.plan or kPlan, with `options.overrides`) on `options.stages` threads.
PipelineRun RunPipeline(const RunOptions& options);

void ExpectSucceeded(const PipelineRun& run);

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_EXEC_PIPELINE_HARNESS_H_
