// Bf16Layer: a layer run in bf16 mixed precision (training.precision: BF16). Its matrix
// products round their inputs to bf16 and accumulate in f32 (LayerContext::gemm_precision);
// its output and its input gradient are rounded to bf16 values (kept in f32 tensors), as a bf16
// activation would be. Parameters, their gradients and the optimizer stay f32 (the master
// weights). Because every layer's output and input gradient is already a bf16 value, a boundary
// tensor sent as bf16 loses nothing: pipelines of any stage count compute the same bits.
// Everything else is the inner layer's. Thread-compatible, like every layer.
#ifndef GPIPE_RUNTIME_EXEC_BF16_LAYER_H_
#define GPIPE_RUNTIME_EXEC_BF16_LAYER_H_

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/layer.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"

namespace gpipe {

class Bf16Layer final : public Layer {
 public:
  explicit Bf16Layer(std::unique_ptr<Layer> inner)
      : Layer(inner->name(), inner->input_shape(), inner->output_shape()),
        inner_(std::move(inner)) {}

  std::string_view type() const override { return inner_->type(); }
  DType input_dtype() const override { return inner_->input_dtype(); }
  std::vector<ParamSpec> parameter_specs() const override { return inner_->parameter_specs(); }
  std::vector<ParamSpec> buffer_specs() const override { return inner_->buffer_specs(); }
  double ForwardFlopsPerSample() const override { return inner_->ForwardFlopsPerSample(); }
  bool OutputAliasesInput() const override { return inner_->OutputAliasesInput(); }
  std::vector<SavedSpec> SavedPerSample() const override { return inner_->SavedPerSample(); }
  bool SplitsBackward() const override { return inner_->SplitsBackward(); }

  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  absl::StatusOr<Tensor> BackwardInput(const LayerContext& ctx, std::span<const Tensor> params,
                                       const SavedTensors& saved, const Tensor& dy) const override;
  absl::Status BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                              const SavedTensors& saved, const Tensor& dy) const override;

 private:
  // `tensor` (f32) with its elements rounded to bf16 (nearest even): in place, or into a new
  // tensor when the inner layer's output may share the input's storage. Other dtypes and
  // undefined tensors pass through.
  absl::StatusOr<Tensor> Rounded(Device& device, Tensor tensor) const;

  std::unique_ptr<Layer> inner_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_BF16_LAYER_H_
