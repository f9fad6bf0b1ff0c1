// Flatten: collapses the per-sample shape into one dimension, [d1, d2, ...] -> [d1 * d2 * ...]
// (torch.nn.Flatten()). No copy: Forward returns a view of its input and Backward a view of the
// output gradient, both reshaped; nothing is saved and no bytes are allocated.
#ifndef GPIPE_LAYERS_FLATTEN_H_
#define GPIPE_LAYERS_FLATTEN_H_

#include <memory>

#include "layers/layer.h"
#include "proto/plan.pb.h"

namespace gpipe {

class Flatten final : public Layer {
 public:
  // Fails with INVALID_ARGUMENT naming the shape when the input has rank 0.
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);

  std::string_view type() const override { return "flatten"; }
  // 0: a view computes nothing.
  double ForwardFlopsPerSample() const override { return 0.0; }
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  // Nothing.
  std::vector<SavedSpec> SavedPerSample() const override { return {}; }
  bool OutputAliasesInput() const override { return true; }

 private:
  Flatten(std::string name, const Shape& input_shape);
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_FLATTEN_H_
