#include "layers/dropout.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {
namespace {

// The layer's random stream for the micro-batch of `ctx`: keyed by (seed, step, layer) and
// starting at the micro-batch's first element within the whole mini-batch, so the mask of a
// micro-batch is the matching slice of the mask the whole mini-batch would get. Forward and
// Backward of one micro-batch see the same context, hence the same key.
RandomKey KeyOf(const LayerContext& ctx, int64_t elements_per_sample) {
  return {.seed = ctx.seed,
          .key = {kDropoutStreamTag, static_cast<uint64_t>(ctx.step),
                  static_cast<uint64_t>(ctx.layer_index)},
          .first_word = static_cast<uint64_t>(ctx.sample_offset * elements_per_sample)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<Layer>> Dropout::Create(const pb::Layer& spec,
                                                       const Shape& input_shape) {
  const double p = spec.dropout().p();
  if (!(p >= 0.0 && p < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("dropout.p must be in [0, 1), got ", p));
  }
  return std::unique_ptr<Layer>(new Dropout(spec.name(), input_shape, p));
}

Dropout::Dropout(std::string name, const Shape& input_shape, double p)
    : Layer(std::move(name), input_shape, input_shape), p_(p) {}

double Dropout::ForwardFlopsPerSample() const {
  return 2.0 * static_cast<double>(input_shape().num_elements());
}

std::vector<SavedSpec> Dropout::SavedPerSample() const {
  if (p_ == 0.0) return {};
  return {{.ref = SavedRef::kNew, .bytes_per_sample = 0, .bytes_per_call = 0}};
}

absl::StatusOr<Tensor> Dropout::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                        const Tensor& x, SavedTensors& saved) const {
  if (!x.defined() || x.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat("dropout layer '", name(), "' expects an f32 input, got ", x.DebugString()));
  }
  if (!ctx.training || p_ == 0.0) return x;
  // The record of the forward's element count: a shape with no elements, so no bytes.
  ASSIGN_OR_RETURN(Tensor record, Tensor::Empty(ctx.device, Shape{0, x.num_elements()}, DType::kF32,
                                                MemoryKind::kActivation));
  ASSIGN_OR_RETURN(Tensor y,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(
      ctx.device.ops().tensor.DropoutMask(KeyOf(ctx, input_shape().num_elements()), p_, x, y));
  saved.tensors.push_back(std::move(record));
  return y;
}

absl::StatusOr<Tensor> Dropout::Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                         std::span<Tensor> grads, const SavedTensors& saved,
                                         const Tensor& dy) const {
  if (!ctx.need_input_grad) return Tensor();
  // Forward was the identity (evaluation or p == 0): so is its gradient.
  if (saved.tensors.empty()) return dy;
  if (!dy.defined() || dy.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dropout layer '", name(), "' expects an f32 output gradient, got ", dy.DebugString()));
  }
  const int64_t forward_elements = saved.tensors[0].shape().dim(1);
  if (dy.num_elements() != forward_elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dropout layer '", name(), "': output gradient ", dy.DebugString(), " has ",
        dy.num_elements(), " elements but the forward's input had ", forward_elements));
  }
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(ctx.device, dy.shape(), DType::kF32, MemoryKind::kActivation));
  RETURN_IF_ERROR(
      ctx.device.ops().tensor.DropoutMask(KeyOf(ctx, input_shape().num_elements()), p_, dy, dx));
  return dx;
}

}  // namespace gpipe
