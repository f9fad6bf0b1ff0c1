// StepSummary: rank 0's view of one finished step, built from every rank's StepReport: what the
// progress line shows and what the metrics file records.
#ifndef GPIPE_RUNTIME_COORD_STEP_SUMMARY_H_
#define GPIPE_RUNTIME_COORD_STEP_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/control.pb.h"
#include "runtime/core/json.h"

namespace gpipe {

struct StepSummary {
  int64_t step = 0;
  // The mini-batch-mean loss: the sum of the replicas' parts (replica_loss).
  double loss = 0.0;
  std::vector<double> replica_loss;  // per data-parallel replica
  // Fraction of the mini-batch's predictions (one per sample, or per position of a sequence)
  // that are correct; < 0 when not classification.
  double accuracy = -1.0;
  bool applied = true;   // whether the optimizer step was applied
  double lr = 0.0;       // the learning rate the step's update used (or would have used)
  // The global L2 norm of the gradients before clipping (training.clip_grad_norm); < 0 when not
  // computed.
  double grad_norm = -1.0;
  double step_ms = 0.0;  // rank 0's wall time for the step (command to decision)
  double samples_per_s = 0.0;
  // Token ids in (every replica's) samples per second; < 0 when the input is not token ids.
  double tokens_per_s = -1.0;
  // Model FLOPs utilization: the ranks' mean achieved TFLOP/s over runtime.peak_tflops; < 0
  // without a peak. Set with tflops_per_rank by AddThroughput (step_work.h).
  double mfu = -1.0;
  double bubble = 0.0;  // mean over ranks of 1 - busy/step time
  // Per rank from here on (replica r's stage s is rank r * stages + s).
  std::vector<int> stage;
  std::vector<int> replica;
  std::vector<int64_t> peak_bytes;
  // The step's peak of: stage inputs kept and activations received ("boundary"),
  // tensors saved inside the stage ("activation"), gradients in flight ("boundary_grad").
  std::vector<int64_t> peak_boundary_bytes;
  std::vector<int64_t> peak_activation_bytes;
  std::vector<int64_t> peak_boundary_grad_bytes;
  std::vector<int64_t> peak_optimizer_state_bytes;
  std::vector<double> busy_ms;
  // Boundary tensors sent and received (payload bytes).
  std::vector<int64_t> bytes_sent;
  std::vector<int64_t> bytes_received;
  // Data parallelism: the gradient all-reduce's span (first bucket's start to last one's end)
  // and the part of it the step waited for at its end; 0 with one replica.
  std::vector<double> all_reduce_ms;
  std::vector<double> all_reduce_exposed_ms;
  // training.shard_optimizer_state: each rank's all-gather after the previous update (empty
  // otherwise); all_reduce_ms then times the reduce-scatter.
  std::vector<double> all_gather_ms;
  // pipeline.offload STAGE_INPUTS (empty otherwise), by rank: the host memory's peak held for
  // offloaded stage inputs, the bytes copied out, and the wait for copies back.
  std::vector<int64_t> peak_offload_bytes;
  std::vector<int64_t> offloaded_bytes;
  std::vector<double> offload_wait_ms;
  // runtime.cuda.graphs (empty otherwise), by rank: graphs launched and captured in the step.
  std::vector<int64_t> graph_launches;
  std::vector<int64_t> graphs_captured;
  // Achieved TFLOP/s: the rank's stage's model FLOPs (forward + backward, recomputation
  // excluded) over step_ms.
  std::vector<double> tflops_per_rank;
  int replicas = 1;
};

// `reports` indexed by rank. Fails if one is missing or from another step.
// predictions_per_sample: class ids per sample (1, or the positions of a sequence target).
absl::StatusOr<StepSummary> Summarize(int64_t step, const std::vector<pb::StepReport>& reports,
                                      int64_t global_batch, double step_ms, bool applied,
                                      int64_t predictions_per_sample = 1);

// "step 10/200 | loss 0.4312 | acc 87.5% | lr 5.00e-02 | 5321 samples/s | step 48.1 ms |
//  bubble 27.4% | 1.23 GFLOP/s/rank | peak mem 1.2 MiB (stage 0)"; with gradient clipping
// "| grad norm 1.234" follows the lr; token inputs add "| 85.1k tok/s" after the samples/s; the
// FLOP rate is the ranks' mean, followed by "(max 1.61 TFLOP/s on stage 1)" when the stages
// differ, and then by "| MFU 12.3%" with a peak; with replicas the peak names
// "(stage 0, replica 1)" and the line ends "| 2 replicas, all-reduce 3.10 ms (0.42 ms exposed)"
// (the slowest rank's); with pipeline.offload "| offload 12.0 MiB host (0.00 ms waited)" (the
// fullest rank's host memory, the longest wait) follows the peak.
std::string FormatProgressLine(const StepSummary& summary, int64_t total_steps);

// The metrics file's record of the step: step, loss, accuracy (classification only), applied,
// lr, grad_norm (with gradient clipping), samples_per_s, tokens_per_s (token inputs), step_ms,
// bubble, mfu (with a peak), and peak_bytes, peak_boundary_bytes, peak_activation_bytes,
// peak_boundary_grad_bytes, peak_optimizer_state_bytes, busy_ms, bytes_sent, bytes_received and
// tflops_per_rank (when set) as lists indexed by rank; with replicas also replicas, replica_loss
// (by replica), stage and replica (by rank), all_reduce_ms and all_reduce_exposed_ms (by rank),
// and all_gather_ms (by rank) with the optimizer state sharded; peak_offload_bytes,
// offloaded_bytes and offload_wait_ms (by rank) with pipeline.offload; graph_launches and
// graphs_captured (by rank) with runtime.cuda.graphs.
Json ToMetricsRecord(const StepSummary& summary);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_STEP_SUMMARY_H_
