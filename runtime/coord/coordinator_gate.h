// CoordinatorGate: every rank's side of the gradient-sync barrier (the step protocol in
// worker.cc): each rank gathers its StepReport to rank 0, which decides apply or skip (skip when
// any rank saw a non-finite loss or gradient) and, with gradient clipping, the gradients' scale
// from the global norm of the reports' per-parameter terms, and broadcasts the decision. Rank 0
// keeps the step's reports for the summary. The gate also carries stop requests: a rank asked to
// stop says so in its report, and the decision tells every rank that this step is the last.
#ifndef GPIPE_RUNTIME_COORD_COORDINATOR_GATE_H_
#define GPIPE_RUNTIME_COORD_COORDINATOR_GATE_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/control.pb.h"
#include "runtime/comm/control_channel.h"
#include "runtime/exec/gradient_sync_gate.h"

namespace gpipe {

class CoordinatorGate final : public GradientSyncGate {
 public:
  // `stop_requested`: WorkerOptions::stop_requested (may be null). `clip_grad_norm`:
  // training.clip_grad_norm (0: no clipping); `sharded_gradients`: the replicas report the squares
  // of their parts (training.shard_optimizer_state, GlobalGradientNorm). `control` must outlive
  // this.
  CoordinatorGate(ControlChannel& control, absl::Duration timeout,
                  std::function<bool()> stop_requested, double clip_grad_norm = 0,
                  bool sharded_gradients = false)
      : control_(control),
        timeout_(timeout),
        stop_requested_(std::move(stop_requested)),
        clip_grad_norm_(clip_grad_norm),
        sharded_gradients_(sharded_gradients) {}

  absl::StatusOr<pb::StepDecision> Synchronize(const pb::StepReport& report) override;

  // Rank 0 only: the reports of the last synchronized step, by rank.
  const std::vector<pb::StepReport>& reports() const { return reports_; }
  bool applied() const { return applied_; }
  // Rank 0 only, with clipping: the global gradient norm of the last applied step before
  // clipping; < 0 without clipping or when the step was skipped.
  double grad_norm() const { return grad_norm_; }
  // Whether some rank was asked to stop by the last synchronized step.
  bool stop() const { return stop_; }

 private:
  ControlChannel& control_;
  absl::Duration timeout_;
  std::function<bool()> stop_requested_;
  double clip_grad_norm_ = 0;
  bool sharded_gradients_ = false;
  std::vector<pb::StepReport> reports_;
  bool applied_ = true;
  bool stop_ = false;
  double grad_norm_ = -1;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_COORDINATOR_GATE_H_
