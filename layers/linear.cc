#include "layers/linear.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
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
    : Layer(std::move(name), input_shape, input_shape.WithLast(out_features)),
      in_features_(input_shape.last()),
      out_features_(out_features),
      bias_(bias) {}

std::vector<ParamSpec> Linear::parameter_specs() const {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features_));
  std::vector<ParamSpec> specs;
  specs.push_back({"weight", Shape{out_features_, in_features_}, ParamInit::kUniform, bound});
  if (bias_) specs.push_back({"bias", Shape{out_features_}, ParamInit::kUniform, bound});
  return specs;
}

double Linear::ForwardFlopsPerSample() const {
  return 2.0 * static_cast<double>(input_shape().rows()) * in_features_ * out_features_;
}

absl::StatusOr<Tensor> Linear::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                       const Tensor& x, SavedTensors& saved) const {
  if (!x.defined() || x.dtype() != DType::kF32 || x.shape().rank() < 1 ||
      x.shape().last() != in_features_) {
    return absl::InvalidArgumentError(absl::StrCat("linear layer '", name(),
                                                   "' expects f32 input [..., ", in_features_,
                                                   "], got ", x.DebugString()));
  }
  const int64_t rows = x.shape().rows();
  ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(ctx.device, x.shape().WithLast(out_features_),
                                           DType::kF32, MemoryKind::kActivation));
  float* out = y.f32();
  if (bias_) {
    const float* b = params[1].f32();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < out_features_; ++o) out[r * out_features_ + o] = b[o];
    }
  }
  // y[rows, out] (+)= x[rows, in] * W[out, in]^T
  RETURN_IF_ERROR(ctx.device.Gemm({.transpose_a = false,
                                   .transpose_b = true,
                                   .m = rows,
                                   .n = out_features_,
                                   .k = in_features_,
                                   .alpha = 1.0f,
                                   .a = x.f32(),
                                   .lda = in_features_,
                                   .b = params[0].f32(),
                                   .ldb = in_features_,
                                   .beta = bias_ ? 1.0f : 0.0f,
                                   .c = out,
                                   .ldc = out_features_}));
  saved.tensors.push_back(x);
  return y;
}

std::vector<SavedSpec> Linear::SavedPerSample() const { return {{SavedRef::kInput}}; }

absl::Status Linear::CheckOutputGrad(const SavedTensors& saved, const Tensor& dy) const {
  GPIPE_CHECK(saved.tensors.size() == 1) << name() << ": Backward without a matching Forward";
  const Tensor& x = saved.tensors[0];
  if (!dy.defined() || dy.dtype() != DType::kF32 ||
      dy.shape() != x.shape().WithLast(out_features_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "linear layer '", name(), "': output gradient ", dy.DebugString(),
        " does not match the forward's output f32", x.shape().WithLast(out_features_).ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Linear::Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                        std::span<Tensor> grads, const SavedTensors& saved,
                                        const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  const Tensor& x = saved.tensors[0];
  RETURN_IF_ERROR(AccumulateParamGrads(ctx.device, grads, x, dy));
  return InputGrad(ctx, params, x, dy);
}

absl::StatusOr<Tensor> Linear::BackwardInput(const LayerContext& ctx,
                                             std::span<const Tensor> params,
                                             const SavedTensors& saved, const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  const Tensor& x = saved.tensors[0];
  return InputGrad(ctx, params, x, dy);
}

absl::Status Linear::BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                                    const SavedTensors& saved, const Tensor& dy) const {
  RETURN_IF_ERROR(CheckOutputGrad(saved, dy));
  const Tensor& x = saved.tensors[0];
  return AccumulateParamGrads(ctx.device, grads, x, dy);
}

absl::Status Linear::AccumulateParamGrads(Device& device, std::span<Tensor> grads, const Tensor& x,
                                          const Tensor& dy) const {
  const int64_t rows = x.shape().rows();
  // dW[out, in] += dy[rows, out]^T * x[rows, in]
  RETURN_IF_ERROR(device.Gemm({.transpose_a = true,
                               .transpose_b = false,
                               .m = out_features_,
                               .n = in_features_,
                               .k = rows,
                               .alpha = 1.0f,
                               .a = dy.f32(),
                               .lda = out_features_,
                               .b = x.f32(),
                               .ldb = in_features_,
                               .beta = 1.0f,
                               .c = grads[0].f32(),
                               .ldc = in_features_}));
  if (bias_) {
    // Summed over rows in double, then added once: the error does not grow with the rows.
    std::vector<double> sum(out_features_, 0.0);
    const float* g = dy.f32();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < out_features_; ++o) sum[o] += g[r * out_features_ + o];
    }
    float* db = grads[1].f32();
    for (int64_t o = 0; o < out_features_; ++o) db[o] += static_cast<float>(sum[o]);
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Linear::InputGrad(const LayerContext& ctx, std::span<const Tensor> params,
                                         const Tensor& x, const Tensor& dy) const {
  if (!ctx.need_input_grad) return Tensor();
  const int64_t rows = x.shape().rows();
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  // dx[rows, in] = dy[rows, out] * W[out, in]
  RETURN_IF_ERROR(ctx.device.Gemm({.transpose_a = false,
                                   .transpose_b = false,
                                   .m = rows,
                                   .n = in_features_,
                                   .k = out_features_,
                                   .alpha = 1.0f,
                                   .a = dy.f32(),
                                   .lda = out_features_,
                                   .b = params[0].f32(),
                                   .ldb = in_features_,
                                   .beta = 0.0f,
                                   .c = dx.f32(),
                                   .ldc = in_features_}));
  return dx;
}

}  // namespace gpipe
