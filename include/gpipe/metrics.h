// gpipe/metrics.h — what a runtime reports about its steps, evaluations and checkpoints.
//
// Contract: plain values, copied out of the runtime; valid on their own. They are produced on
// rank 0 (the coordinator), which gathers every rank's report at each step's gradient-sync
// barrier; the other ranks see none (see Runtime::history). The same numbers are what
// gpipe-worker prints in its progress line and writes to runtime.metrics_out (docs/metrics-and-traces.md,
// "The progress line").
#ifndef GPIPE_METRICS_H_
#define GPIPE_METRICS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gpipe {

struct StepMetrics {
  int64_t step = 0;   // 0-based
  double loss = 0.0;  // the mini-batch-mean loss
  // Fraction of correct predictions of the mini-batch; < 0 when the loss is not a
  // classification.
  double accuracy = -1.0;
  // Whether the update was applied (false: a non-finite loss or gradient skipped it).
  bool applied = true;
  double step_ms = 0.0;  // rank 0's wall time of the step
  double samples_per_second = 0.0;
  // Token ids per second over every replica; < 0 when model.input is not token ids.
  double tokens_per_second = -1.0;
  // Model FLOPs utilization: the ranks' mean achieved TFLOP/s over runtime.peak_tflops; < 0
  // when the plan sets no peak.
  double mfu = -1.0;
  double bubble_fraction = 0.0;      // mean over ranks of 1 - busy/step time
  std::vector<double> replica_loss;  // per data-parallel replica
  std::vector<int64_t> peak_bytes;   // per rank: the device's peak memory in the step
  std::vector<int64_t> bytes_sent;   // per rank: boundary tensors sent (payload bytes)
  // Per rank: achieved TFLOP/s, its stage's model FLOPs (forward + backward, recomputation
  // excluded) over step_ms.
  std::vector<double> tflops_per_rank;
};

struct EvalMetrics {
  int64_t after_step = 0;  // training steps done before this evaluation
  int64_t samples = 0;
  double loss = 0.0;       // mean over samples
  double accuracy = -1.0;  // < 0 when not a classification
  double elapsed_ms = 0.0;
};

struct CheckpointInfo {
  int64_t step = 0;       // training steps the checkpoint holds
  std::string directory;  // checkpoint.dir/step-NNNNNNNNN; resume with it or with "latest"
};

}  // namespace gpipe

#endif  // GPIPE_METRICS_H_
