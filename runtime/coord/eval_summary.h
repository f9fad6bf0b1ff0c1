// EvalSummary: rank 0's account of one evaluation of the held-out split, accumulated batch by
// batch from the last stage's StepReports of forward-only programs: the mean loss over the
// real samples (padding excluded), the accuracy over their predictions (classification), and
// for byte-level language models the loss in bits per byte.
#ifndef GPIPE_RUNTIME_COORD_EVAL_SUMMARY_H_
#define GPIPE_RUNTIME_COORD_EVAL_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/control.pb.h"
#include "runtime/core/json.h"

namespace gpipe {

class EvalSummary {
 public:
  // after_step: training steps completed before this evaluation. bits_per_byte: report the loss
  // in bits too (the targets are bytes).
  EvalSummary(int64_t after_step, bool bits_per_byte)
      : after_step_(after_step), bits_per_byte_(bits_per_byte) {}

  // Adds one evaluation batch; `reports` indexed by rank, the last stage of every replica
  // carrying the sums of its share.
  // Fails when no report carries evaluation sums.
  absl::Status Add(const std::vector<pb::StepReport>& reports);
  void set_elapsed_ms(double ms) { elapsed_ms_ = ms; }
  double elapsed_ms() const { return elapsed_ms_; }

  int64_t samples() const { return samples_; }
  // Mean over samples of each sample's loss (itself a mean over positions).
  double loss() const { return samples_ > 0 ? loss_sum_ / samples_ : 0.0; }
  // Fraction of correct predictions; < 0 when the loss is not a classification.
  double accuracy() const;
  // loss / ln 2 (byte-level models); < 0 when not asked for.
  double bits_per_byte() const;

  // "eval after step 500 | loss 0.3125 | acc 89.4% | 10000 samples | 812 ms"
  std::string FormatLine() const;
  // {"eval":true,"step":500,"loss":...,"accuracy":...,"bits_per_byte":...,"samples":...,
  //  "eval_ms":...}; "step" counts the training steps done.
  Json ToMetricsRecord() const;

 private:
  int64_t after_step_;
  bool bits_per_byte_;
  double loss_sum_ = 0.0;
  int64_t samples_ = 0;
  int64_t predictions_ = 0;
  int64_t correct_ = 0;
  bool classification_ = false;
  double elapsed_ms_ = 0.0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_EVAL_SUMMARY_H_
