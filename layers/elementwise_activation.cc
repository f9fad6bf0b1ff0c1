#include "layers/elementwise_activation.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {
namespace {

// f32, or bf16 under bf16 products (KeepsBf16).
absl::Status CheckDType(const LayerContext& ctx, std::string_view layer_type,
                        const std::string& layer_name, const char* what, const Tensor& t) {
  const bool bf16_ok = ctx.product_precision == ProductPrecision::kBF16;
  if (!t.defined() || !(t.dtype() == DType::kF32 || (bf16_ok && t.dtype() == DType::kBF16))) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(layer_type), " layer '", layer_name,
                                                   "' expects an f32", bf16_ok ? " or bf16 " : " ",
                                                   what, ", got ", t.DebugString()));
  }
  return absl::OkStatus();
}

}  // namespace

ElementwiseActivation::ElementwiseActivation(std::string name, const Shape& input_shape,
                                             Activation activation, double flops_per_element)
    : Layer(std::move(name), input_shape, input_shape),
      activation_(activation),
      flops_per_element_(flops_per_element) {}

double ElementwiseActivation::ForwardFlopsPerSample() const {
  return flops_per_element_ * static_cast<double>(input_shape().num_elements());
}

std::vector<SavedSpec> ElementwiseActivation::SavedPerSample() const {
  return {{ActivationBackwardReadsInput(activation_) ? SavedRef::kInput : SavedRef::kOutput}};
}

absl::StatusOr<Tensor> ElementwiseActivation::Forward(const LayerContext& ctx,
                                                      std::span<const Tensor> params,
                                                      const Tensor& x, SavedTensors& saved) const {
  RETURN_IF_ERROR(CheckDType(ctx, type(), name(), "input", x));
  ASSIGN_OR_RETURN(Tensor y,
                   Tensor::Empty(ctx.device, x.shape(), x.dtype(), MemoryKind::kActivation));
  RETURN_IF_ERROR(ctx.device.ops().activation.Forward(activation_, x, y));
  saved.tensors.push_back(ActivationBackwardReadsInput(activation_) ? x : y);
  return y;
}

absl::StatusOr<Tensor> ElementwiseActivation::Backward(const LayerContext& ctx,
                                                       std::span<const Tensor> params,
                                                       std::span<Tensor> grads,
                                                       const SavedTensors& saved,
                                                       const Tensor& dy) const {
  if (!ctx.need_input_grad) return Tensor();
  GPIPE_CHECK(saved.tensors.size() == 1) << name() << ": Backward without a matching Forward";
  const Tensor& kept = saved.tensors[0];
  RETURN_IF_ERROR(CheckDType(ctx, type(), name(), "output gradient", dy));
  if (dy.shape() != kept.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(type()), " layer '", name(), "': output gradient ",
                     dy.DebugString(), " does not match the forward's ", kept.DebugString()));
  }
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(ctx.device, dy.shape(), dy.dtype(), MemoryKind::kActivation));
  RETURN_IF_ERROR(ctx.device.ops().activation.Backward(activation_, kept, dy, dx));
  return dx;
}

}  // namespace gpipe
