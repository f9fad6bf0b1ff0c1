#include "layers/linear.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "layers/dense.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Layer>> Linear::Create(const pb::Layer& spec,
                                                      const Shape& input_shape) {
  const pb::Linear& config = spec.linear();
  if (!config.has_out_features() || config.out_features() < 1) {
    return absl::InvalidArgumentError("linear.out_features must be set and >= 1");
  }
  if (input_shape.rank() < 1 || input_shape.last() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "linear needs an input with a last dimension >= 1, got ", input_shape.ToString()));
  }
  return std::unique_ptr<Layer>(
      new Linear(spec.name(), input_shape, config.out_features(), config.bias()));
}

Linear::Linear(std::string name, Shape input_shape, int64_t out_features, bool bias)
    : SplitBackwardLayer(std::move(name), input_shape, input_shape.WithLast(out_features)),
      in_features_(input_shape.last()),
      out_features_(out_features),
      bias_(bias) {}

std::vector<ParamSpec> Linear::parameter_specs() const {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features_));
  std::vector<ParamSpec> specs;
  specs.push_back({"weight", Shape{out_features_, in_features_}, ParamInit::kUniform, bound,
                   /*product_operand=*/true});
  if (bias_) specs.push_back({"bias", Shape{out_features_}, ParamInit::kUniform, bound});
  return specs;
}

double Linear::ForwardFlopsPerSample() const {
  return 2.0 * static_cast<double>(input_shape().rows()) * in_features_ * out_features_;
}

absl::StatusOr<Tensor> Linear::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                       const Tensor& x, SavedTensors& saved) const {
  // bf16 only where the products take it as it is (TakesBf16Inputs).
  const bool bf16_ok = ctx.product_precision == ProductPrecision::kBF16;
  if (!x.defined() || !(x.dtype() == DType::kF32 || (bf16_ok && x.dtype() == DType::kBF16)) ||
      x.shape().rank() < 1 || x.shape().last() != in_features_) {
    return absl::InvalidArgumentError(absl::StrCat("linear layer '", name(), "' expects f32",
                                                   bf16_ok ? " or bf16" : "", " input [..., ",
                                                   in_features_, "], got ", x.DebugString()));
  }
  const int64_t rows = x.shape().rows();
  ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(ctx.device, x.shape().WithLast(out_features_),
                                           bf16_ok && ctx.bf16_output ? DType::kBF16 : DType::kF32,
                                           MemoryKind::kActivation));
  RETURN_IF_ERROR(DenseForward(ctx.device, x, rows, in_features_, params[0],
                               bias_ ? &params[1] : nullptr, out_features_, y,
                               ctx.product_precision));
  saved.tensors.push_back(x);
  return y;
}

std::vector<SavedSpec> Linear::SavedPerSample() const { return {{SavedRef::kInput}}; }

absl::Status Linear::CheckOutputGrad(const LayerContext& ctx, const SavedTensors& saved,
                                     const Tensor& dy) const {
  GPIPE_CHECK(saved.tensors.size() == 1) << name() << ": Backward without a matching Forward";
  const Tensor& x = saved.tensors[0];
  const bool bf16_ok = ctx.product_precision == ProductPrecision::kBF16;
  if (!dy.defined() || !(dy.dtype() == DType::kF32 || (bf16_ok && dy.dtype() == DType::kBF16)) ||
      dy.shape() != x.shape().WithLast(out_features_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "linear layer '", name(), "': output gradient ", dy.DebugString(),
        " does not match the forward's output f32", x.shape().WithLast(out_features_).ToString(),
        bf16_ok ? " (or its bf16)" : ""));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Linear::BackwardInput(const LayerContext& ctx,
                                             std::span<const Tensor> params,
                                             const SavedTensors& saved, const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(ctx, saved, dy));
  const Tensor& x = saved.tensors[0];
  return InputGrad(ctx, params, x, dy);
}

absl::Status Linear::BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                                    const SavedTensors& saved, const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(ctx, saved, dy));
  const Tensor& x = saved.tensors[0];
  return AccumulateParamGrads(ctx, grads, x, dy);
}

absl::Status Linear::AccumulateParamGrads(const LayerContext& ctx, std::span<Tensor> grads,
                                          const Tensor& x, const Tensor& dy) const {
  return DenseParamGrads(ctx.device, x, dy, x.shape().rows(), in_features_, out_features_, grads[0],
                         bias_ ? &grads[1] : nullptr, ctx.product_precision);
}

absl::StatusOr<Tensor> Linear::InputGrad(const LayerContext& ctx, std::span<const Tensor> params,
                                         const Tensor& x, const Tensor& dy) const {
  if (!ctx.need_input_grad) return Tensor();
  const int64_t rows = x.shape().rows();
  const bool bf16 = ctx.product_precision == ProductPrecision::kBF16 && ctx.bf16_input_grad;
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(ctx.device, x.shape(), bf16 ? DType::kBF16 : DType::kF32,
                                 MemoryKind::kActivation));
  RETURN_IF_ERROR(DenseInputGrad(ctx.device, dy, rows, out_features_, params[0], in_features_, dx,
                                 ctx.product_precision));
  return dx;
}

}  // namespace gpipe
