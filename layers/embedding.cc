#include "layers/embedding.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Layer>> Embedding::Create(const pb::Layer& spec,
                                                         const Shape& input_shape) {
  const pb::Embedding& config = spec.embedding();
  if (!config.has_num_embeddings() || config.num_embeddings() < 1) {
    return absl::InvalidArgumentError(
        "embedding.num_embeddings must be set and >= 1 (the vocabulary size)");
  }
  if (!config.has_embedding_dim() || config.embedding_dim() < 1) {
    return absl::InvalidArgumentError("embedding.embedding_dim must be set and >= 1");
  }
  if (!(config.init_std() >= 0.0) || !std::isfinite(config.init_std())) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding.init_std must be >= 0 and finite, got ", config.init_std()));
  }
  if (input_shape.rank() != 1 || input_shape.dim(0) < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding needs per-sample input of token ids [T] (rank 1, T >= 1), got ",
                     input_shape.ToString()));
  }
  return std::unique_ptr<Layer>(new Embedding(spec.name(), input_shape, config.num_embeddings(),
                                              config.embedding_dim(), config.init_std()));
}

Embedding::Embedding(std::string name, const Shape& input_shape, int64_t num_embeddings,
                     int64_t embedding_dim, double init_std)
    : Layer(std::move(name), input_shape, Shape{input_shape.dim(0), embedding_dim}),
      num_embeddings_(num_embeddings),
      embedding_dim_(embedding_dim),
      init_std_(init_std) {}

std::vector<ParamSpec> Embedding::parameter_specs() const {
  return {{"weight", Shape{num_embeddings_, embedding_dim_}, ParamInit::kNormal, init_std_}};
}

double Embedding::ForwardFlopsPerSample() const {
  return static_cast<double>(output_shape().num_elements());
}

absl::StatusOr<Tensor> Embedding::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                          const Tensor& x, SavedTensors& saved) const {
  const int64_t positions = input_shape().dim(0);
  if (!x.defined() || x.dtype() != DType::kI64 || x.shape().rank() != 2 ||
      x.shape().dim(1) != positions) {
    return absl::InvalidArgumentError(absl::StrCat("embedding layer '", name(),
                                                   "' expects i64 token ids [batch, ", positions,
                                                   "], got ", x.DebugString()));
  }
  const int64_t batch = x.shape().dim(0);
  const int64_t* ids = x.data<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < positions; ++t) {
      const int64_t id = ids[b * positions + t];
      if (id < 0 || id >= num_embeddings_) {
        return absl::InvalidArgumentError(
            absl::StrCat("embedding layer '", name(), "': sample ", ctx.sample_offset + b, " (row ",
                         b, " of micro-batch ", ctx.micro_batch, "), position ", t,
                         " has token id ", id, ", outside [0, ", num_embeddings_,
                         "); check the data or raise embedding.num_embeddings"));
      }
    }
  }
  ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(ctx.device, output_shape().WithBatch(batch), DType::kF32,
                                           MemoryKind::kActivation));
  const float* table = params[0].f32();
  float* out = y.f32();
  for (int64_t r = 0; r < batch * positions; ++r) {
    const float* row = table + ids[r] * embedding_dim_;
    std::copy(row, row + embedding_dim_, out + r * embedding_dim_);
  }
  saved.tensors.push_back(x);
  return y;
}

std::vector<SavedSpec> Embedding::SavedPerSample() const { return {{SavedRef::kInput}}; }

absl::StatusOr<Tensor> Embedding::Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                           std::span<Tensor> grads, const SavedTensors& saved,
                                           const Tensor& dy) const {
  GPIPE_CHECK(saved.tensors.size() == 1) << name() << ": Backward without a matching Forward";
  const Tensor& x = saved.tensors[0];
  const Shape expected{x.shape().dim(0), x.shape().dim(1), embedding_dim_};
  if (!dy.defined() || dy.dtype() != DType::kF32 || dy.shape() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding layer '", name(), "': output gradient ", dy.DebugString(),
                     " does not match the forward's output f32", expected.ToString()));
  }
  const int64_t* ids = x.data<int64_t>();
  const float* g = dy.f32();
  float* dweight = grads[0].f32();
  for (int64_t r = 0; r < x.num_elements(); ++r) {
    float* row = dweight + ids[r] * embedding_dim_;
    const float* gr = g + r * embedding_dim_;
    for (int64_t i = 0; i < embedding_dim_; ++i) row[i] += gr[i];
  }
  return Tensor();
}

}  // namespace gpipe
