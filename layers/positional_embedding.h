// PositionalEmbedding: learned absolute positions (GPT-2's wpe). Per sample [T, D] ->
// y[t] = x[t] + weight[t], using the first T rows of weight [max_positions, D], drawn from
// N(0, init_std^2). T <= max_positions is checked at Create. Forward saves nothing; Backward
// adds dy summed over the batch into dweight and returns dx = dy (a copy).
#ifndef GPIPE_LAYERS_POSITIONAL_EMBEDDING_H_
#define GPIPE_LAYERS_POSITIONAL_EMBEDDING_H_

#include <memory>

#include "layers/layer.h"
#include "proto/plan.pb.h"

namespace gpipe {

class PositionalEmbedding final : public Layer {
 public:
  // Fails with INVALID_ARGUMENT when positional_embedding.max_positions is unset or < 1,
  // positional_embedding.init_std is negative or not finite, the input is not [T, D], or
  // T > max_positions.
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);

  std::string_view type() const override { return "positional_embedding"; }
  std::vector<ParamSpec> parameter_specs() const override;
  // One add per element.
  double ForwardFlopsPerSample() const override;
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  // Nothing: the gradients depend on dy alone.
  std::vector<SavedSpec> SavedPerSample() const override { return {}; }

 private:
  PositionalEmbedding(std::string name, const Shape& input_shape, int64_t max_positions,
                      double init_std);

  int64_t max_positions_;
  int64_t positions_;  // T
  int64_t features_;   // D
  double init_std_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_POSITIONAL_EMBEDDING_H_
