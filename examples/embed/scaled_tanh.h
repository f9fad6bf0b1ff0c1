// ScaledTanh: y = scale * weight * tanh(x), elementwise, with a learnable per-feature weight
// ([features], the last dimension; starts at ones) and a fixed scale (custom.numbers["scale"],
// default 1) — the example's custom layer, written as a CPU kernel (host loops over the tensors'
// f32() pointers). ScaledTanhLayer holds what every kernel shares (shapes, the parameter, costs);
// ScaledTanh is the CPU kernel, ScaledTanhCuda (scaled_tanh_cuda.h) the CUDA one.
//
// In a plan: layers { name: "act1" custom { type: "scaled_tanh" } }. The embedding example
// registers it (main.cc); tests/api checks its gradients against finite differences and the
// CUDA kernel against the CPU one.
#ifndef GPIPE_EXAMPLES_EMBED_SCALED_TANH_H_
#define GPIPE_EXAMPLES_EMBED_SCALED_TANH_H_

#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gpipe/custom_layer.h"

namespace gpipe_example {

class ScaledTanhLayer : public gpipe::Layer {
 public:
  std::string_view type() const override { return "scaled_tanh"; }
  std::vector<gpipe::ParamSpec> parameter_specs() const override {
    return {{"weight", gpipe::Shape{features_}, gpipe::ParamInit::kOnes}};
  }
  double ForwardFlopsPerSample() const override { return 3.0 * input_shape().num_elements(); }
  std::vector<gpipe::SavedSpec> SavedPerSample() const override {
    return {{gpipe::SavedRef::kInput}};
  }

  // custom.numbers["scale"] (default 1) of a layer whose input has a feature dimension.
  static absl::StatusOr<float> ScaleOf(const gpipe::LayerArgs& args) {
    if (args.input_shape().rank() < 1) {
      return absl::InvalidArgumentError("scaled_tanh needs an input with a feature dimension");
    }
    const double scale = args.NumberOr("scale", 1.0);
    if (!std::isfinite(scale)) {
      return absl::InvalidArgumentError(absl::StrCat("custom.numbers scale is ", scale));
    }
    return static_cast<float>(scale);
  }

 protected:
  ScaledTanhLayer(const gpipe::LayerArgs& args, float scale)
      : Layer(args.name(), args.input_shape(), args.input_shape()),
        features_(args.input_shape().dims().back()),
        scale_(scale) {}

  int64_t features_;
  float scale_;
};

// The CPU kernel.
class ScaledTanh final : public ScaledTanhLayer {
 public:
  static absl::StatusOr<std::unique_ptr<gpipe::Layer>> Create(const gpipe::LayerArgs& args) {
    absl::StatusOr<float> scale = ScaleOf(args);
    if (!scale.ok()) return scale.status();
    return std::unique_ptr<gpipe::Layer>(new ScaledTanh(args, *scale));
  }

  absl::StatusOr<gpipe::Tensor> Forward(const gpipe::LayerContext& ctx,
                                        std::span<const gpipe::Tensor> params,
                                        const gpipe::Tensor& x,
                                        gpipe::SavedTensors& saved) const override {
    auto y = gpipe::Tensor::Empty(ctx.device, x.shape(), gpipe::DType::kF32,
                                  gpipe::MemoryKind::kActivation);
    if (!y.ok()) return y.status();
    const float* in = x.f32();
    const float* weight = params[0].f32();
    float* out = y->f32();
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      out[i] = scale_ * weight[i % features_] * std::tanh(in[i]);
    }
    if (ctx.training) saved.tensors.push_back(x);
    return y;
  }

  absl::StatusOr<gpipe::Tensor> Backward(const gpipe::LayerContext& ctx,
                                         std::span<const gpipe::Tensor> params,
                                         std::span<gpipe::Tensor> grads,
                                         const gpipe::SavedTensors& saved,
                                         const gpipe::Tensor& dy) const override {
    const gpipe::Tensor& x = saved.tensors.at(0);
    const float* in = x.f32();
    const float* weight = params[0].f32();
    const float* g = dy.f32();
    float* dweight = grads[0].f32();
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      dweight[i % features_] += scale_ * g[i] * std::tanh(in[i]);
    }
    if (!ctx.need_input_grad) return gpipe::Tensor();
    auto dx = gpipe::Tensor::Empty(ctx.device, x.shape(), gpipe::DType::kF32,
                                   gpipe::MemoryKind::kActivation);
    if (!dx.ok()) return dx.status();
    float* out = dx->f32();
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      const float t = std::tanh(in[i]);
      out[i] = g[i] * scale_ * weight[i % features_] * (1.0f - t * t);
    }
    return dx;
  }

 private:
  ScaledTanh(const gpipe::LayerArgs& args, float scale) : ScaledTanhLayer(args, scale) {}
};

}  // namespace gpipe_example

#endif  // GPIPE_EXAMPLES_EMBED_SCALED_TANH_H_
