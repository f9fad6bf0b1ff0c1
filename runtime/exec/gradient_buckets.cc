#include "runtime/exec/gradient_buckets.h"

#include "runtime/exec/parameter_store.h"
#include "runtime/exec/stage_model.h"

namespace gpipe {

std::vector<int> AssignBuckets(std::span<const int64_t> layer_bytes, int64_t bucket_bytes) {
  std::vector<int> bucket_of(layer_bytes.size(), -1);
  int bucket = 0;
  int64_t open = 0;
  for (size_t i = 0; i < layer_bytes.size(); ++i) {
    if (layer_bytes[i] == 0) continue;
    bucket_of[i] = bucket;
    open += layer_bytes[i];
    if (open >= bucket_bytes) {
      ++bucket;
      open = 0;
    }
  }
  return bucket_of;
}

GradientBuckets GradientBuckets::Plan(std::span<const ChunkRefs> chunks, int64_t bucket_bytes) {
  GradientBuckets out;
  out.bucket_of_.resize(chunks.size());
  // Layers in the order the backward finishes them: the last chunk's last layer first.
  std::vector<std::pair<int, int>> order;
  std::vector<int64_t> bytes;
  for (int c = static_cast<int>(chunks.size()) - 1; c >= 0; --c) {
    const int layers = chunks[c].model->num_layers();
    out.bucket_of_[c].assign(layers, -1);
    for (int l = layers - 1; l >= 0; --l) {
      int64_t layer_bytes = 0;
      for (const Tensor& grad : chunks[c].parameters->grads_of(l)) layer_bytes += grad.bytes();
      order.push_back({c, l});
      bytes.push_back(layer_bytes);
    }
  }
  const std::vector<int> assigned = AssignBuckets(bytes, bucket_bytes);
  for (size_t i = 0; i < order.size(); ++i) {
    if (assigned[i] < 0) continue;
    const auto [c, l] = order[i];
    if (assigned[i] >= static_cast<int>(out.buckets_.size())) out.buckets_.emplace_back();
    Bucket& bucket = out.buckets_[assigned[i]];
    out.bucket_of_[c][l] = assigned[i];
    bucket.layers.push_back({c, l});
    for (const Tensor& grad : chunks[c].parameters->grads_of(l)) {
      bucket.tensors.push_back(grad);
      bucket.bytes += grad.bytes();
    }
    for (const Tensor& value : chunks[c].parameters->values_of(l)) bucket.values.push_back(value);
  }
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
