#include "layers/residual.h"

#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "layers/bf16_tensors.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Layer>> Residual::Create(const pb::Layer& spec,
                                                        const Shape& input_shape,
                                                        InnerLayerBuilder build_inner) {
  const pb::Residual& config = spec.residual();
  if (config.layers_size() == 0) {
    return absl::InvalidArgumentError(
        "residual.layers is empty; give the layers of f in y = x + f(x)");
  }
  absl::flat_hash_set<std::string> names;
  std::vector<std::unique_ptr<Layer>> children;
  Shape current = input_shape;
  for (int i = 0; i < config.layers_size(); ++i) {
    const pb::Layer& inner = config.layers(i);
    const std::string label = absl::StrCat("residual.layers[", i, "] '", inner.name(), "'");
    if (inner.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "residual.layers[", i, "] has no name; name every inner layer (its parameters are ",
          spec.name(), ".<name>.weight, ...)"));
    }
    if (!names.insert(inner.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": the name is used twice in this residual; names must be unique"));
    }
    auto layer = build_inner(inner, current);
    if (!layer.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(label, " (", LayerKindName(inner), ", input ",
                                                     current.ToString(),
                                                     "): ", layer.status().message()));
    }
    if (*layer == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(label, ": its factory returned no layer"));
    }
    current = (*layer)->output_shape();
    children.push_back(*std::move(layer));
  }
  if (current != input_shape) {
    return absl::InvalidArgumentError(absl::StrCat("residual layers turn ", input_shape.ToString(),
                                                   " into ", current.ToString(),
                                                   "; y = x + f(x) needs f to keep the shape"));
  }
  ASSIGN_OR_RETURN(LayerSequence body, LayerSequence::Create(std::move(children)));
  return Wrap(spec.name(), std::move(body));
}

absl::StatusOr<std::unique_ptr<Layer>> Residual::Wrap(std::string name, LayerSequence body) {
  if (body.input_shape() != body.output_shape()) {
    return absl::InvalidArgumentError(absl::StrCat("residual '", name, "': its layers turn ",
                                                   body.input_shape().ToString(), " into ",
                                                   body.output_shape().ToString()));
  }
  return std::unique_ptr<Layer>(new Residual(std::move(name), std::move(body)));
}

Residual::Residual(std::string name, LayerSequence body)
    : Layer(std::move(name), body.input_shape(), body.output_shape()), body_(std::move(body)) {}

double Residual::ForwardFlopsPerSample() const {
  return body_.ForwardFlopsPerSample() + static_cast<double>(input_shape().num_elements());
}

std::vector<SavedSpec> Residual::SavedPerSample() const {
  std::vector<SavedSpec> specs = body_.SavedPerSample();
  for (SavedSpec& spec : specs) {
    // f's output is not this layer's output (that is the sum): it is storage of its own.
    if (spec.ref == SavedRef::kOutput) {
      spec = {.ref = SavedRef::kNew,
              .activation_elements_per_sample = output_shape().num_elements()};
    }
  }
  return specs;
}

absl::StatusOr<Tensor> Residual::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                         const Tensor& x, SavedTensors& saved) const {
  if (!x.defined() || x.dtype() != DType::kF32 || x.shape().rank() < 1 ||
      x.shape().WithoutBatch() != input_shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("residual '", name(), "' expects f32 samples of shape ",
                     input_shape().ToString(), ", got ", x.DebugString()));
  }
  const size_t first = saved.tensors.size();
  ASSIGN_OR_RETURN(Tensor f, body_.Forward(ctx, params, x, saved));
  ASSIGN_OR_RETURN(Tensor y,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(
      WithContext(ctx.device.ops().tensor.Add(x, f, y), absl::StrCat("residual '", name(), "'")));
  // f, where f's last layer saves it, is kept as ctx.saved_activation_dtype once the sum is made.
  if (ctx.training) {
    const std::vector<SavedSpec> body_specs = body_.SavedPerSample();
    for (size_t k = 0; k < body_specs.size(); ++k) {
      if (body_specs[k].ref != SavedRef::kOutput) continue;
      ASSIGN_OR_RETURN(saved.tensors[first + k], StoredActivation(ctx, saved.tensors[first + k]));
    }
  }
  return y;
}

absl::StatusOr<Tensor> Residual::Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                          std::span<Tensor> grads, const SavedTensors& saved,
                                          const Tensor& dy) const {
  if (!dy.defined() || dy.dtype() != DType::kF32 || dy.shape().rank() < 1 ||
      dy.shape().WithoutBatch() != output_shape()) {
    return absl::InvalidArgumentError(absl::StrCat("residual '", name(), "': output gradient ",
                                                   dy.DebugString(), " does not match samples of ",
                                                   output_shape().ToString()));
  }
  ASSIGN_OR_RETURN(Tensor dx, body_.Backward(ctx, params, grads, saved, dy));
  if (!ctx.need_input_grad) return Tensor();
  // dL/dx = dL/dy (the skip) + f's input gradient, added in place into f's fresh gradient.
  // When f's gradient is dy itself (f was the identity), the sum goes into new storage, so dy
  // is never changed under a caller that still holds it.
  Tensor sum = dx;
  if (dx.SharesStorageWith(dy)) {
    ASSIGN_OR_RETURN(sum,
                     Tensor::Empty(ctx.device, dx.shape(), DType::kF32, MemoryKind::kActivation));
  }
  RETURN_IF_ERROR(WithContext(ctx.device.ops().tensor.Add(dx, dy, sum),
                              absl::StrCat("residual '", name(), "'")));
  return sum;
}

}  // namespace gpipe
