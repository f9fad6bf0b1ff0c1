// Embedding: token ids -> rows of a learned table (torch.nn.Embedding). Per sample the input is
// i64 ids [T] and the output f32 [T, embedding_dim]: y[t] = weight[id[t]]. weight
// [num_embeddings, embedding_dim], drawn from N(0, init_std^2). Forward rejects an id outside
// [0, num_embeddings) and saves the ids (shared storage); Backward scatter-adds dy rows into
// dweight and never returns an input gradient (ids have none).
#ifndef GPIPE_LAYERS_EMBEDDING_H_
#define GPIPE_LAYERS_EMBEDDING_H_

#include <memory>

#include "layers/layer.h"
#include "proto/plan.pb.h"
#include "runtime/device/ops/bad_id.h"

namespace gpipe {

class Embedding final : public Layer {
 public:
  // Fails with INVALID_ARGUMENT when embedding.num_embeddings or embedding.embedding_dim is
  // unset or < 1, embedding.init_std is negative or not finite, or the input is not [T].
  static absl::StatusOr<std::unique_ptr<Layer>> Create(const pb::Layer& spec,
                                                       const Shape& input_shape);

  std::string_view type() const override { return "embedding"; }
  DType input_dtype() const override { return DType::kI64; }
  std::vector<ParamSpec> parameter_specs() const override;
  // A gather does no arithmetic; counted as one operation per output element.
  double ForwardFlopsPerSample() const override;
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override;
  // The ids' range, with Forward's message (the data path runs it before the upload).
  absl::Status CheckHostInput(const LayerContext& ctx, const Tensor& x) const override;
  // Returns an undefined Tensor whatever ctx.need_input_grad says.
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override;
  // Saves its input ids: {kInput}.
  std::vector<SavedSpec> SavedPerSample() const override;

 private:
  Embedding(std::string name, const Shape& input_shape, int64_t num_embeddings,
            int64_t embedding_dim, double init_std);
  // INVALID_ARGUMENT unless x is i64 [batch, T].
  absl::Status CheckIdsShape(const Tensor& x) const;
  // The error for token id `bad` of a micro-batch: its sample, position and the valid range.
  absl::Status BadTokenId(const LayerContext& ctx, BadId bad) const;

  int64_t num_embeddings_;
  int64_t embedding_dim_;
  double init_std_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_EMBEDDING_H_
