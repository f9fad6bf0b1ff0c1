#include "layers/embedding.h"

#include <cmath>
#include <optional>
#include <span>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

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

absl::Status Embedding::CheckIdsShape(const Tensor& x) const {
  const int64_t positions = input_shape().dim(0);
  if (!x.defined() || x.dtype() != DType::kI64 || x.shape().rank() != 2 ||
      x.shape().dim(1) != positions) {
    return absl::InvalidArgumentError(absl::StrCat("embedding layer '", name(),
                                                   "' expects i64 token ids [batch, ", positions,
                                                   "], got ", x.DebugString()));
  }
  return absl::OkStatus();
}

absl::Status Embedding::BadTokenId(const LayerContext& ctx, BadId bad) const {
  const int64_t positions = input_shape().dim(0);
  const int64_t b = bad.index / positions;
  const int64_t t = bad.index % positions;
  return absl::InvalidArgumentError(absl::StrCat(
      "embedding layer '", name(), "': sample ", ctx.sample_offset + b, " (row ", b,
      " of micro-batch ", ctx.micro_batch, "), position ", t, " has token id ", bad.id,
      ", outside [0, ", num_embeddings_, "); check the data or raise embedding.num_embeddings"));
}

absl::Status Embedding::CheckHostInput(const LayerContext& ctx, const Tensor& x) const {
  RETURN_IF_ERROR(CheckIdsShape(x));
  if (!x.host_accessible()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding layer '", name(), "': the host cannot read the token ids ", x.DebugString()));
  }
  const std::optional<BadId> bad = FirstIdOutside(
      std::span<const int64_t>(x.data<int64_t>(), x.num_elements()), num_embeddings_);
  return bad.has_value() ? BadTokenId(ctx, *bad) : absl::OkStatus();
}

absl::StatusOr<Tensor> Embedding::Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                          const Tensor& x, SavedTensors& saved) const {
  RETURN_IF_ERROR(CheckIdsShape(x));
  const int64_t batch = x.shape().dim(0);
  ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(ctx.device, output_shape().WithBatch(batch), DType::kF32,
                                           MemoryKind::kActivation));
  // A device that checks ids without waiting (CUDA) reports a bad one from its next wait, in
  // the op's words; the data path's host check before the upload has already said it in ours.
  const absl::Status gathered = ctx.device.ops().embedding.Gather(params[0], x, y);
  if (!gathered.ok()) {
    const std::optional<BadId> bad = BadIdOf(gathered);
    if (!bad.has_value()) {
      return WithContext(gathered, absl::StrCat("embedding layer '", name(), "'"));
    }
    return BadTokenId(ctx, *bad);
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
  RETURN_IF_ERROR(WithContext(ctx.device.ops().embedding.ScatterAdd(x, dy, grads[0]),
                              absl::StrCat("embedding layer '", name(), "'")));
  return Tensor();
}

}  // namespace gpipe
