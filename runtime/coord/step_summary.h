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
  double loss = 0.0;
  // Fraction of the mini-batch's predictions (one per sample, or per position of a sequence)
  // that are correct; < 0 when not classification.
  double accuracy = -1.0;
  bool applied = true;     // whether the optimizer step was applied
  double step_ms = 0.0;    // rank 0's wall time for the step (command to decision)
  double samples_per_s = 0.0;
  double bubble = 0.0;              // mean over stages of 1 - busy/step time
  std::vector<int64_t> peak_bytes;  // per stage
  // Per stage, the step's peak of: stage inputs kept and activations received ("boundary"),
  // tensors saved inside the stage ("activation"), gradients in flight ("boundary_grad").
  std::vector<int64_t> peak_boundary_bytes;
  std::vector<int64_t> peak_activation_bytes;
  std::vector<int64_t> peak_boundary_grad_bytes;
  std::vector<double> busy_ms;  // per stage
};

// `reports` indexed by rank (= stage here). Fails if one is missing or from another step.
// predictions_per_sample: class ids per sample (1, or the positions of a sequence target).
absl::StatusOr<StepSummary> Summarize(int64_t step, const std::vector<pb::StepReport>& reports,
                                      int64_t global_batch, double step_ms, bool applied,
                                      int64_t predictions_per_sample = 1);

// "step 10/200 | loss 0.4312 | acc 87.5% | 5321 samples/s | step 48.1 ms | bubble 27.4% |
//  peak mem 1.2 MiB (stage 0)"
std::string FormatProgressLine(const StepSummary& summary, int64_t total_steps);

// The metrics file's record of the step: step, loss, accuracy (classification only), applied,
// samples_per_s, step_ms, bubble, and peak_bytes, peak_boundary_bytes, peak_activation_bytes,
// peak_boundary_grad_bytes and busy_ms as lists indexed by stage.
Json ToMetricsRecord(const StepSummary& summary);

// "1.2 MiB"
std::string FormatBytes(int64_t bytes);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_STEP_SUMMARY_H_
