// ClusterSource: the example's custom in-memory data source — `samples` points in the model's
// input space, one Gaussian cluster per class around seeded centers, generated when the source
// opens and held in memory. Its settings come from the plan:
//   data { custom { name: "clusters" eval_split: true
//                   numbers { key: "samples" value: 4096 } numbers { key: "spread" value: 1.5 } } }
// The held-out split draws other points from the same clusters. Deterministic in
// (training.seed, split), so every rank that reads data sees the same samples.
#ifndef GPIPE_EXAMPLES_EMBED_CLUSTER_SOURCE_H_
#define GPIPE_EXAMPLES_EMBED_CLUSTER_SOURCE_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gpipe/data_source.h"

namespace gpipe_example {

class ClusterSource final : public gpipe::Dataset {
 public:
  static absl::StatusOr<std::unique_ptr<gpipe::Dataset>> Open(const gpipe::DataSourceArgs& args) {
    const gpipe::DataRequirements& need = args.requirements();
    if (need.input_dtype != gpipe::DType::kF32 || need.input_shape.rank() != 1 ||
        need.target_dtype != gpipe::DType::kI64 || need.num_classes < 2) {
      return absl::InvalidArgumentError(
          "clusters serves float32 vectors (model.input { shape: [D] }) with class ids "
          "(softmax_cross_entropy over >= 2 classes)");
    }
    const double samples = args.NumberOr("samples", 4096);
    const double spread = args.NumberOr("spread", 1.0);
    if (!(samples >= 1 && samples <= 1e7) || !(spread >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("clusters: samples ", samples, " spread ",
                                                     spread, "; need 1..1e7 samples, spread >= 0"));
    }
    const bool eval = args.split() == gpipe::DataSplit::kEval;
    return std::unique_ptr<gpipe::Dataset>(
        new ClusterSource(static_cast<int64_t>(samples), need.input_shape, need.target_shape,
                          need.num_classes, spread, need.seed, eval));
  }

  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  const gpipe::Shape& input_shape() const override { return input_shape_; }
  gpipe::DType input_dtype() const override { return gpipe::DType::kF32; }
  const gpipe::Shape& target_shape() const override { return target_shape_; }
  gpipe::DType target_dtype() const override { return gpipe::DType::kI64; }

  absl::Status GatherInputs(std::span<const int64_t> indices, gpipe::Tensor& out) const override {
    const int64_t d = input_shape_.num_elements();
    float* rows = out.f32();
    for (size_t i = 0; i < indices.size(); ++i) {
      float* row = rows + static_cast<int64_t>(i) * d;
      if (indices[i] == gpipe::kPaddingSample) {
        std::memset(row, 0, d * sizeof(float));
        continue;
      }
      if (indices[i] < 0 || indices[i] >= size()) return OutOfRange(indices[i]);
      std::memcpy(row, &points_[indices[i] * d], d * sizeof(float));
    }
    return absl::OkStatus();
  }

  absl::Status GatherTargets(std::span<const int64_t> indices, gpipe::Tensor& out) const override {
    int64_t* labels = out.data<int64_t>();
    for (size_t i = 0; i < indices.size(); ++i) {
      if (indices[i] == gpipe::kPaddingSample) {
        labels[i] = 0;
        continue;
      }
      if (indices[i] < 0 || indices[i] >= size()) return OutOfRange(indices[i]);
      labels[i] = labels_[indices[i]];
    }
    return absl::OkStatus();
  }

 private:
  ClusterSource(int64_t samples, const gpipe::Shape& input_shape, const gpipe::Shape& target_shape,
                int64_t classes, double spread, uint64_t seed, bool eval)
      : input_shape_(input_shape), target_shape_(target_shape) {
    const int64_t d = input_shape.num_elements();
    // The centers depend on the seed only; the points on the split too.
    std::mt19937_64 centers_rng(seed);
    std::normal_distribution<double> unit(0.0, 1.0);
    std::vector<double> centers(classes * d);
    for (double& c : centers) c = 2.0 * unit(centers_rng);
    std::mt19937_64 rng(seed * 2654435761u + (eval ? 2 : 1));
    points_.resize(samples * d);
    labels_.resize(samples);
    for (int64_t i = 0; i < samples; ++i) {
      labels_[i] = static_cast<int64_t>(rng() % classes);
      for (int64_t j = 0; j < d; ++j) {
        points_[i * d + j] = static_cast<float>(centers[labels_[i] * d + j] + spread * unit(rng));
      }
    }
  }

  absl::Status OutOfRange(int64_t index) const {
    return absl::OutOfRangeError(
        absl::StrCat("clusters: sample ", index, " is outside [0, ", size(), ")"));
  }

  gpipe::Shape input_shape_;
  gpipe::Shape target_shape_;
  std::vector<float> points_;
  std::vector<int64_t> labels_;
};

}  // namespace gpipe_example

#endif  // GPIPE_EXAMPLES_EMBED_CLUSTER_SOURCE_H_
