#include "layers/dropout.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/core/rng.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// Layout of the saved key tensor. kFirstElement is the micro-batch's first element within the
// whole mini-batch (sample_offset * elements per sample), so the mask of a micro-batch is the
// matching slice of the mask the whole mini-batch would get. kElements guards Backward against
// a gradient that does not match the forward's input.
enum KeyWord { kSeed = 0, kStep, kLayerIndex, kFirstElement, kElements, kKeyWords };

// out[i] = in[i] * scale where element i is kept, 0 where it is dropped.
void ApplyMask(const int64_t* key, double p, const float* in, float* out, int64_t n) {
  RandomStream stream(static_cast<uint64_t>(key[kSeed]),
                      {kDropoutStreamTag, static_cast<uint64_t>(key[kStep]),
                       static_cast<uint64_t>(key[kLayerIndex])});
  stream.Seek(static_cast<uint64_t>(key[kFirstElement]));
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = static_cast<double>(stream.NextUniform()) >= p;
    out[i] = keep ? in[i] * scale : 0.0f;
  }
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
  return {{.ref = SavedRef::kNew,
           .bytes_per_sample = 0,
           .bytes_per_call = kKeyWords * SizeOf(DType::kI64)}};
}

absl::StatusOr<Tensor> Dropout::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                        const Tensor& x, SavedTensors& saved) const {
  if (!x.defined() || x.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat("dropout layer '", name(), "' expects an f32 input, got ", x.DebugString()));
  }
  if (!ctx.training || p_ == 0.0) return x;
  ASSIGN_OR_RETURN(Tensor key, Tensor::Empty(ctx.device, Shape{kKeyWords}, DType::kI64,
                                             MemoryKind::kActivation));
  int64_t* words = key.data<int64_t>();
  words[kSeed] = static_cast<int64_t>(ctx.seed);
  words[kStep] = ctx.step;
  words[kLayerIndex] = ctx.layer_index;
  words[kFirstElement] = ctx.sample_offset * input_shape().num_elements();
  words[kElements] = x.num_elements();
  ASSIGN_OR_RETURN(Tensor y,
                   Tensor::Empty(ctx.device, x.shape(), DType::kF32, MemoryKind::kActivation));
  ApplyMask(words, p_, x.f32(), y.f32(), x.num_elements());
  saved.tensors.push_back(std::move(key));
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
  const int64_t* key = saved.tensors[0].data<int64_t>();
  if (dy.num_elements() != key[kElements]) {
    return absl::InvalidArgumentError(
        absl::StrCat("dropout layer '", name(), "': output gradient ", dy.DebugString(), " has ",
                     dy.num_elements(), " elements but the forward's input had ", key[kElements]));
  }
  ASSIGN_OR_RETURN(Tensor dx,
                   Tensor::Empty(ctx.device, dy.shape(), DType::kF32, MemoryKind::kActivation));
  ApplyMask(key, p_, dy.f32(), dx.f32(), dy.num_elements());
  return dx;
}

}  // namespace gpipe
