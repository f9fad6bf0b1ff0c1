// ScaledTanhCuda: the scaled_tanh layer with CUDA kernels (scaled_tanh_kernels.cu), launched on
// the stage GPU's compute stream; tensors are device memory, read through DevicePointer.
#include "scaled_tanh_cuda.h"

#include <memory>
#include <span>

#include "absl/strings/str_cat.h"
#include "gpipe/cuda.h"
#include "scaled_tanh.h"
#include "scaled_tanh_kernels.h"

namespace gpipe_example {
namespace {

absl::Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(error)));
}

class ScaledTanhCuda final : public ScaledTanhLayer {
 public:
  ScaledTanhCuda(const gpipe::LayerArgs& args, float scale) : ScaledTanhLayer(args, scale) {}

  absl::StatusOr<gpipe::Tensor> Forward(const gpipe::LayerContext& ctx,
                                        std::span<const gpipe::Tensor> params,
                                        const gpipe::Tensor& x,
                                        gpipe::SavedTensors& saved) const override {
    auto y = gpipe::Tensor::Empty(ctx.device, x.shape(), gpipe::DType::kF32,
                                  gpipe::MemoryKind::kActivation);
    if (!y.ok()) return y.status();
    const absl::Status launched =
        CudaStatus(LaunchScaledTanhForward(gpipe::DevicePointer<float>(x),
                                           gpipe::DevicePointer<float>(params[0]),
                                           gpipe::DevicePointer<float>(*y), x.num_elements(),
                                           features_, scale_, gpipe::CudaStreamOf(ctx.device)),
                   "scaled_tanh forward");
    if (!launched.ok()) return launched;
    if (ctx.training) saved.tensors.push_back(x);
    return y;
  }

  absl::StatusOr<gpipe::Tensor> Backward(const gpipe::LayerContext& ctx,
                                         std::span<const gpipe::Tensor> params,
                                         std::span<gpipe::Tensor> grads,
                                         const gpipe::SavedTensors& saved,
                                         const gpipe::Tensor& dy) const override {
    const gpipe::Tensor& x = saved.tensors.at(0);
    gpipe::Tensor dx;
    if (ctx.need_input_grad) {
      auto allocated = gpipe::Tensor::Empty(ctx.device, x.shape(), gpipe::DType::kF32,
                                            gpipe::MemoryKind::kActivation);
      if (!allocated.ok()) return allocated.status();
      dx = *std::move(allocated);
    }
    const absl::Status launched =
        CudaStatus(LaunchScaledTanhBackward(
                       gpipe::DevicePointer<float>(x), gpipe::DevicePointer<float>(params[0]),
                       gpipe::DevicePointer<float>(dy), gpipe::DevicePointer<float>(grads[0]),
                       dx.defined() ? gpipe::DevicePointer<float>(dx) : nullptr, x.num_elements(),
                       features_, scale_, gpipe::CudaStreamOf(ctx.device)),
                   "scaled_tanh backward");
    if (!launched.ok()) return launched;
    return dx;
  }
};

}  // namespace

gpipe::CustomLayerFactory ScaledTanhCudaFactory() {
  return [](const gpipe::LayerArgs& args) -> absl::StatusOr<std::unique_ptr<gpipe::Layer>> {
    absl::StatusOr<float> scale = ScaledTanhLayer::ScaleOf(args);
    if (!scale.ok()) return scale.status();
    return std::unique_ptr<gpipe::Layer>(new ScaledTanhCuda(args, *scale));
  };
}

}  // namespace gpipe_example
