// Dropout: inverted dropout (torch.nn.Dropout). In training it zeroes each element with
// probability p and scales the rest by 1/(1-p); in evaluation or with p == 0 it returns its input
// tensor itself. Element j of the whole mini-batch is kept iff the j-th draw of
// RandomStream(seed, {kDropoutStreamTag, step, layer_index}) is >= p; a micro-batch starting at
// sample ctx.sample_offset uses elements from sample_offset * (elements per sample) on. So a
// re-run Forward replays the mask, and neither the partition nor the number of micro-batches
// changes it. Backward rebuilds the key from its context (the same as the forward's) and
// regenerates the mask on the device; Forward saves only a record of its input's element count
// (a tensor with no elements, so no bytes), which tells Backward the forward was not the
// identity and checks the gradient's size.
#ifndef GPIPE_LAYERS_DROPOUT_H_
#define GPIPE_LAYERS_DROPOUT_H_

#include <cstdint>
#include <memory>

#include "layers/layer.h"
#include "proto/plan.pb.h"

namespace gpipe {

// First key word of dropout's random streams ("dropout\0" in ASCII), apart from every other use.
inline constexpr uint64_t kDropoutStreamTag = 0x74756F706F7264ull;

class Dropout final : public Layer {
 public:
  // Fails with INVALID_ARGUMENT when dropout.p is outside [0, 1).
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);

  std::string_view type() const override { return "dropout"; }
  double ForwardFlopsPerSample() const override;
  double p() const { return p_; }
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  // With p > 0: {kNew: the element-count record, 0 bytes}; with p == 0: nothing. Evaluation
  // saves nothing either.
  std::vector<SavedSpec> SavedPerSample() const override;
  // With p = 0, Forward returns its input itself.
  bool OutputAliasesInput() const override { return p_ == 0.0; }
  // With p > 0: the masks are keyed by the step.
  bool DependsOnStep() const override { return p_ > 0.0; }

 private:
  Dropout(std::string name, const Shape& input_shape, double p);
  double p_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_DROPOUT_H_
