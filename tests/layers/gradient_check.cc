#include "tests/layers/gradient_check.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

// Gradients start here; Backward must add to it.
constexpr float kGradientStart = 0.25f;

// J = sum(y * r) in double.
absl::StatusOr<double> Objective(const Layer& layer, const LayerContext& ctx,
                                 std::span<const Tensor> params, const Tensor& x,
                                 const Tensor& projection) {
  SavedTensors saved;
  ASSIGN_OR_RETURN(Tensor y, layer.Forward(ctx, params, x, saved));
  if (y.shape() != projection.shape()) {
    return absl::InternalError(absl::StrCat("forward output ", y.DebugString(),
                                            " changed shape; expected ", projection.DebugString()));
  }
  const float* out = y.f32();
  const float* r = projection.f32();
  double sum = 0.0;
  for (int64_t i = 0; i < y.num_elements(); ++i) sum += static_cast<double>(out[i]) * r[i];
  return sum;
}

void Compare(const std::string& where, int64_t index, double analytic, double numeric,
             const GradientCheckOptions& options, GradientCheckReport& report) {
  const double error = std::fabs(analytic - numeric);
  report.max_error = std::max(report.max_error, error);
  ++report.checked;
  if (!(error <= options.tolerance * std::max(1.0, std::fabs(numeric)))) {
    report.mismatches.push_back({where, index, analytic, numeric});
  }
}

// Central differences of `objective` over every element of `perturbed`, compared with
// `analytic` (same element count).
template <typename ObjectiveFn>
absl::Status CheckElements(const std::string& where, Tensor& perturbed,
                           const std::vector<double>& analytic, ObjectiveFn objective,
                           const GradientCheckOptions& options, GradientCheckReport& report) {
  float* values = perturbed.f32();
  for (int64_t i = 0; i < perturbed.num_elements(); ++i) {
    const float original = values[i];
    values[i] = static_cast<float>(original + options.step);
    const double plus_h = static_cast<double>(values[i]) - original;
    ASSIGN_OR_RETURN(const double j_plus, objective());
    values[i] = static_cast<float>(original - options.step);
    const double minus_h = original - static_cast<double>(values[i]);
    ASSIGN_OR_RETURN(const double j_minus, objective());
    values[i] = original;
    Compare(where, i, analytic[i], (j_plus - j_minus) / (plus_h + minus_h), options, report);
  }
  return absl::OkStatus();
}

}  // namespace

std::string GradientCheckReport::ToString() const {
  std::string text = absl::StrCat(checked, " elements checked, max error ", max_error, ", ",
                                  mismatches.size(), " mismatches");
  for (size_t i = 0; i < mismatches.size() && i < 8; ++i) {
    const GradientMismatch& m = mismatches[i];
    absl::StrAppend(&text, "\n  ", m.where, "[", m.index, "]: analytic ", m.analytic, ", numeric ",
                    m.numeric);
  }
  return text;
}

absl::StatusOr<GradientCheckReport> CheckLayerGradients(const Layer& layer, const LayerContext& ctx,
                                                        std::span<const Tensor> params,
                                                        const Tensor& x,
                                                        const GradientCheckOptions& options) {
  Device& device = ctx.device;
  std::vector<Tensor> perturbed_params;
  for (const Tensor& p : params) {
    ASSIGN_OR_RETURN(Tensor copy, p.Clone(MemoryKind::kParameter));
    perturbed_params.push_back(std::move(copy));
  }
  ASSIGN_OR_RETURN(Tensor perturbed_x, x.Clone(MemoryKind::kData));

  // Analytic gradients.
  SavedTensors saved;
  ASSIGN_OR_RETURN(Tensor y, layer.Forward(ctx, params, x, saved));
  const Tensor projection = UniformTensor(device, y.shape(), options.seed, -1.0f, 1.0f);
  std::vector<Tensor> grads = ZeroGrads(layer, device);
  for (Tensor& g : grads) {
    const std::span<float> values = g.f32_span();
    std::fill(values.begin(), values.end(), kGradientStart);
  }
  ASSIGN_OR_RETURN(Tensor dx, layer.Backward(ctx, params, grads, saved, projection));

  auto objective = [&]() {
    return Objective(layer, ctx, perturbed_params, perturbed_x, projection);
  };
  GradientCheckReport report;
  if (ctx.need_input_grad) {
    if (!dx.defined() || dx.shape() != x.shape() || dx.dtype() != DType::kF32) {
      return absl::InternalError(
          absl::StrCat("Backward returned dx ", dx.DebugString(), " for input ", x.DebugString()));
    }
    const std::vector<float> dx_values = Values(dx);
    RETURN_IF_ERROR(CheckElements("dx", perturbed_x,
                                  std::vector<double>(dx_values.begin(), dx_values.end()),
                                  objective, options, report));
  }
  const std::vector<ParamSpec> specs = layer.parameter_specs();
  for (size_t p = 0; p < grads.size(); ++p) {
    std::vector<double> analytic;
    for (float g : grads[p].f32_span()) analytic.push_back(static_cast<double>(g) - kGradientStart);
    RETURN_IF_ERROR(CheckElements(absl::StrCat("param ", specs[p].name), perturbed_params[p],
                                  analytic, objective, options, report));
  }
  return report;
}

absl::StatusOr<LossResult> ComputeLoss(const Loss& loss, Device& device, const Tensor& output,
                                       const Tensor& targets, int64_t global_batch) {
  ASSIGN_OR_RETURN(Tensor totals, Tensor::Empty(device, Shape{kLossTotalsSize}, DType::kF64,
                                                MemoryKind::kActivation));
  RETURN_IF_ERROR(device.ops().tensor.Fill(totals, 0.0));
  LossResult result;
  ASSIGN_OR_RETURN(result.grad, loss.Compute(device, output, targets, global_batch, totals));
  double values[kLossTotalsSize];
  RETURN_IF_ERROR(device.CopyToHost(totals, values, sizeof(values)));
  result.loss = values[kLossSum];
  result.correct = loss.counts_correct() ? static_cast<int64_t>(values[kLossCorrect]) : -1;
  return result;
}

absl::StatusOr<GradientCheckReport> CheckLossGradient(const Loss& loss, Device& device,
                                                      const Tensor& output, const Tensor& targets,
                                                      int64_t global_batch,
                                                      const GradientCheckOptions& options) {
  ASSIGN_OR_RETURN(LossResult result, ComputeLoss(loss, device, output, targets, global_batch));
  if (!result.grad.defined() || result.grad.shape() != output.shape()) {
    return absl::InternalError(absl::StrCat("loss gradient ", result.grad.DebugString(),
                                            " for output ", output.DebugString()));
  }
  const std::vector<float> grad_values = Values(result.grad);
  ASSIGN_OR_RETURN(Tensor perturbed, output.Clone(MemoryKind::kData));
  auto objective = [&]() -> absl::StatusOr<double> {
    ASSIGN_OR_RETURN(LossResult r, ComputeLoss(loss, device, perturbed, targets, global_batch));
    return r.loss;
  };
  GradientCheckReport report;
  RETURN_IF_ERROR(CheckElements("doutput", perturbed,
                                std::vector<double>(grad_values.begin(), grad_values.end()),
                                objective, options, report));
  return report;
}

}  // namespace gpipe::testing
