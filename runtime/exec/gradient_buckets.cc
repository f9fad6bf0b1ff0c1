#include "runtime/exec/gradient_buckets.h"

#include "runtime/exec/parameter_store.h"
#include "runtime/exec/stage_model.h"

namespace gpipe {

GradientBuckets GradientBuckets::Plan(std::span<const ChunkRefs> chunks, int64_t bucket_bytes) {
  GradientBuckets out;
  out.bucket_of_.resize(chunks.size());
  Bucket current;
  const auto close = [&] {
    if (current.tensors.empty()) return;
    out.buckets_.push_back(std::move(current));
    current = Bucket();
  };
  for (int c = static_cast<int>(chunks.size()) - 1; c >= 0; --c) {
    const int layers = chunks[c].model->num_layers();
    out.bucket_of_[c].assign(layers, -1);
    for (int l = layers - 1; l >= 0; --l) {
      const std::span<Tensor> grads = chunks[c].parameters->grads_of(l);
      if (grads.empty()) continue;
      out.bucket_of_[c][l] = static_cast<int>(out.buckets_.size());
      current.layers.push_back({c, l});
      for (const Tensor& grad : grads) {
        current.tensors.push_back(grad);
        current.bytes += grad.bytes();
      }
      if (current.bytes >= bucket_bytes) close();
    }
  }
  close();
  out.gradient_buckets_ = static_cast<int>(out.buckets_.size());
  Bucket buffers;
  buffers.buffers = true;
  for (const ChunkRefs& chunk : chunks) {
    for (int l = 0; l < chunk.model->num_layers(); ++l) {
      for (const Tensor& buffer : chunk.parameters->buffers_of(l)) {
        buffers.tensors.push_back(buffer);
        buffers.bytes += buffer.bytes();
      }
    }
  }
  if (!buffers.tensors.empty()) out.buckets_.push_back(std::move(buffers));
  return out;
}

std::vector<std::vector<int64_t>> GradientBuckets::Layout() const {
  std::vector<std::vector<int64_t>> layout;
  for (const Bucket& bucket : buckets_) {
    std::vector<int64_t>& counts = layout.emplace_back();
    for (const Tensor& tensor : bucket.tensors) counts.push_back(tensor.num_elements());
  }
  return layout;
}

int GradientBuckets::BucketOf(int chunk, int layer) const {
  if (chunk < 0 || chunk >= static_cast<int>(bucket_of_.size())) return -1;
  if (layer < 0 || layer >= static_cast<int>(bucket_of_[chunk].size())) return -1;
  return bucket_of_[chunk][layer];
}

}  // namespace gpipe
