#include "layers/gated_mlp.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "layers/bf16_tensors.h"
#include "layers/dense.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {
namespace {

// transformers' initializer_range default for Llama.
constexpr double kInitStddev = 0.02;

}  // namespace

absl::StatusOr<std::unique_ptr<Layer>> GatedMlp::Create(std::string name, const Shape& input_shape,
                                                        int64_t intermediate_size) {
  if (input_shape.rank() < 1 || input_shape.last() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gated MLP needs an input with a last dimension >= 1, got ", input_shape.ToString()));
  }
  if (intermediate_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("intermediate_size must be >= 1, got ", intermediate_size));
  }
  return std::unique_ptr<Layer>(new GatedMlp(std::move(name), input_shape, intermediate_size));
}

GatedMlp::GatedMlp(std::string name, const Shape& input_shape, int64_t intermediate_size)
    : Layer(std::move(name), input_shape, input_shape),
      features_(input_shape.last()),
      intermediate_(intermediate_size) {}

std::vector<ParamSpec> GatedMlp::parameter_specs() const {
  // Each weight enters only its product.
  constexpr bool kProduct = true;
  return {{"gate_proj.weight", Shape{intermediate_, features_}, ParamInit::kNormal, kInitStddev,
           kProduct},
          {"up_proj.weight", Shape{intermediate_, features_}, ParamInit::kNormal, kInitStddev,
           kProduct},
          {"down_proj.weight", Shape{features_, intermediate_}, ParamInit::kNormal, kInitStddev,
           kProduct}};
}

double GatedMlp::ForwardFlopsPerSample() const {
  const double rows = static_cast<double>(input_shape().rows());
  const double d = static_cast<double>(features_);
  const double hidden = static_cast<double>(intermediate_);
  // Three products, and about 4 operations per hidden value for silu(gate) * up.
  return rows * (3.0 * 2.0 * d * hidden + 4.0 * hidden);
}

std::vector<SavedSpec> GatedMlp::SavedPerSample() const {
  const int64_t hidden = input_shape().rows() * intermediate_;
  return {{SavedRef::kInput},
          {.ref = SavedRef::kNew, .activation_elements_per_sample = hidden},
          {.ref = SavedRef::kNew, .activation_elements_per_sample = hidden}};
}

DType GatedMlp::InnerDType(const LayerContext& ctx) {
  return ctx.product_precision == ProductPrecision::kBF16 &&
                 ctx.saved_activation_dtype == DType::kBF16
             ? DType::kBF16
             : DType::kF32;
}

Shape GatedMlp::HiddenShape(const Shape& x_shape) const {
  std::vector<int64_t> dims = x_shape.dims();
  dims.back() = intermediate_;
  return Shape(dims);
}

absl::StatusOr<Tensor> GatedMlp::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                         const Tensor& x, SavedTensors& saved) const {
  if (!x.defined() || x.dtype() != DType::kF32 || x.shape().rank() < 2 ||
      x.shape().WithoutBatch() != input_shape()) {
    return absl::InvalidArgumentError(absl::StrCat("gated MLP '", name(), "' expects f32 samples ",
                                                   input_shape().ToString(), ", got ",
                                                   x.DebugString()));
  }
  Device& device = ctx.device;
  const ProductPrecision precision = ctx.product_precision;
  const int64_t rows = x.shape().rows();
  const Shape hidden_shape = HiddenShape(x.shape());
  const DType inner = InnerDType(ctx);
  ASSIGN_OR_RETURN(Tensor gate,
                   Tensor::Empty(device, hidden_shape, inner, MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor up, Tensor::Empty(device, hidden_shape, inner, MemoryKind::kActivation));
  RETURN_IF_ERROR(DenseForward(device, x, rows, features_, params[kGate], nullptr, intermediate_,
                               gate, precision));
  RETURN_IF_ERROR(
      DenseForward(device, x, rows, features_, params[kUp], nullptr, intermediate_, up, precision));
  ASSIGN_OR_RETURN(Tensor y,
                   Tensor::Empty(device, x.shape(), DType::kF32, MemoryKind::kActivation));
  {
    ASSIGN_OR_RETURN(Tensor hidden,
                     Tensor::Empty(device, hidden_shape, inner, MemoryKind::kWorkspace));
    RETURN_IF_ERROR(device.ops().activation.SwiGluForward(gate, up, hidden));
    RETURN_IF_ERROR(DenseForward(device, hidden, rows, intermediate_, params[kDown], nullptr,
                                 features_, y, precision));
  }
  saved.tensors.push_back(x);
  ASSIGN_OR_RETURN(saved.tensors.emplace_back(), StoredActivation(ctx, gate));
  ASSIGN_OR_RETURN(saved.tensors.emplace_back(), StoredActivation(ctx, up));
  return y;
}

absl::StatusOr<Tensor> GatedMlp::Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                          std::span<Tensor> grads, const SavedTensors& saved,
                                          const Tensor& dy) const {
  GPIPE_CHECK(saved.tensors.size() == 3) << name() << ": Backward without a matching Forward";
  const Tensor& x = saved.tensors[0];
  if (!dy.defined() || dy.dtype() != DType::kF32 || dy.shape() != x.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("gated MLP '", name(), "': output gradient ",
                                                   dy.DebugString(), " does not match the input ",
                                                   x.DebugString()));
  }
  Device& device = ctx.device;
  const ProductPrecision precision = ctx.product_precision;
  const int64_t rows = x.shape().rows();
  const Shape hidden_shape = HiddenShape(x.shape());
  // gate and up as kept (the ops read bf16 as it is); the intermediates in the same dtype.
  const Tensor& gate = saved.tensors[1];
  const Tensor& up = saved.tensors[2];
  const DType inner = InnerDType(ctx);

  ASSIGN_OR_RETURN(Tensor gate_grad,
                   Tensor::Empty(device, hidden_shape, inner, MemoryKind::kWorkspace));
  ASSIGN_OR_RETURN(Tensor up_grad,
                   Tensor::Empty(device, hidden_shape, inner, MemoryKind::kWorkspace));
  {
    // down_proj, on the product recomputed from gate and up.
    ASSIGN_OR_RETURN(Tensor hidden,
                     Tensor::Empty(device, hidden_shape, inner, MemoryKind::kWorkspace));
    RETURN_IF_ERROR(device.ops().activation.SwiGluForward(gate, up, hidden));
    RETURN_IF_ERROR(DenseParamGrads(device, hidden, dy, rows, intermediate_, features_,
                                    grads[kDown], nullptr, precision));
    // The product's gradient reuses its storage.
    RETURN_IF_ERROR(DenseInputGrad(device, dy, rows, features_, params[kDown], intermediate_,
                                   hidden, precision));
    RETURN_IF_ERROR(device.ops().activation.SwiGluBackward(gate, up, hidden, gate_grad, up_grad));
  }
  RETURN_IF_ERROR(DenseParamGrads(device, x, gate_grad, rows, features_, intermediate_,
                                  grads[kGate], nullptr, precision));
  RETURN_IF_ERROR(DenseParamGrads(device, x, up_grad, rows, features_, intermediate_, grads[kUp],
                                  nullptr, precision));
  if (!ctx.need_input_grad) return Tensor();
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(device, x.shape(), DType::kF32, MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor part,
                   Tensor::Empty(device, x.shape(), DType::kF32, MemoryKind::kWorkspace));
  RETURN_IF_ERROR(DenseInputGrad(device, gate_grad, rows, intermediate_, params[kGate], features_,
                                 dx, precision));
  RETURN_IF_ERROR(DenseInputGrad(device, up_grad, rows, intermediate_, params[kUp], features_, part,
                                 precision));
  RETURN_IF_ERROR(device.ops().tensor.Add(dx, part, dx));
  return dx;
}

}  // namespace gpipe
