// Finite-difference gradient checks for layers and losses.
//
// For a layer, the objective is J = sum(y * r) with r a fixed random tensor (J accumulated in
// double); every input and parameter element is perturbed by +-h and the central difference is
// compared with the analytic gradient from Backward. Gradients start at a non-zero value, so a
// Backward that overwrites instead of adding is caught too. For a loss, J is the loss itself.
#ifndef GPIPE_TESTS_LAYERS_GRADIENT_CHECK_H_
#define GPIPE_TESTS_LAYERS_GRADIENT_CHECK_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/layer.h"
#include "layers/loss.h"

namespace gpipe::testing {

struct GradientCheckOptions {
  double step = 1e-2;       // h of the central difference
  double tolerance = 2e-3;  // passes when |analytic - numeric| <= tolerance * max(1, |numeric|)
  uint64_t seed = 1234;     // of the projection r
};

struct GradientMismatch {
  std::string where;  // "dx" or "param <name>"
  int64_t index = 0;  // flat element index
  double analytic = 0.0;
  double numeric = 0.0;
};

struct GradientCheckReport {
  int64_t checked = 0;  // elements compared
  double max_error = 0.0;
  std::vector<GradientMismatch> mismatches;
  bool ok() const { return checked > 0 && mismatches.empty(); }
  // The first few mismatches, for a test's failure message.
  std::string ToString() const;
};

// Checks dx (when ctx.need_input_grad) and every parameter gradient of `layer` at (params, x).
// Neither params nor x is modified (the checker perturbs copies).
absl::StatusOr<GradientCheckReport> CheckLayerGradients(const Layer& layer, const LayerContext& ctx,
                                                        std::span<const Tensor> params,
                                                        const Tensor& x,
                                                        const GradientCheckOptions& options = {});

// One Loss::Compute call read back on the host: the call's loss and correct count (from fresh
// zeroed totals) and its gradient.
struct LossResult {
  double loss = 0.0;     // this micro-batch's share of the mini-batch mean
  Tensor grad;           // dL/doutput, shaped like the output
  int64_t correct = -1;  // correct argmax predictions (classification), -1 otherwise
};
absl::StatusOr<LossResult> ComputeLoss(const Loss& loss, Device& device, const Tensor& output,
                                       const Tensor& targets, int64_t global_batch);

// Checks the loss's gradient with respect to `output`.
absl::StatusOr<GradientCheckReport> CheckLossGradient(const Loss& loss, Device& device,
                                                      const Tensor& output, const Tensor& targets,
                                                      int64_t global_batch,
                                                      const GradientCheckOptions& options = {});

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_LAYERS_GRADIENT_CHECK_H_
