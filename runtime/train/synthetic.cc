#include "runtime/train/synthetic.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/core/rng.h"
#include "runtime/core/status_macros.h"
#include "runtime/train/gather_checks.h"

namespace gpipe {
namespace {

// Stream tags: distinct key words so the streams of centers, labels, inputs, the teacher and the
// target noise never coincide.
constexpr uint64_t kCenterTag = 0x53594E43454E5452ull;       // "SYNCENTR"
constexpr uint64_t kLabelTag = 0x53594E4C4142454Cull;        // "SYNLABEL"
constexpr uint64_t kInputTag = 0x53594E494E505554ull;        // "SYNINPUT"
constexpr uint64_t kTeacherTag = 0x53594E5445414348ull;      // "SYNTEACH"
constexpr uint64_t kTargetNoiseTag = 0x53594E4E4F495345ull;  // "SYNNOISE"

constexpr double kTeacherBiasScale = 0.5;
constexpr char kName[] = "synthetic data";

}  // namespace

absl::StatusOr<std::unique_ptr<SyntheticDataset>> SyntheticDataset::Create(
    const pb::Synthetic& spec, const DataRequirements& requirements) {
  if (spec.num_samples() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.synthetic.num_samples must be >= 1, got ", spec.num_samples()));
  }
  if (!(spec.noise() >= 0) || !std::isfinite(spec.noise())) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.synthetic.noise must be >= 0, got ", spec.noise()));
  }
  if (requirements.input_shape.num_elements() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("data.synthetic: the model input ",
                                                   requirements.input_shape.ToString(),
                                                   " has no elements"));
  }
  if (requirements.num_classes > 0) {
    if (requirements.target_dtype != DType::kI64 || requirements.target_shape.rank() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data.synthetic: classification data has one i64 class id per sample, but the loss "
          "expects ",
          DTypeName(requirements.target_dtype), requirements.target_shape.ToString(), " targets"));
    }
  } else if (requirements.target_dtype != DType::kF32 ||
             requirements.target_shape.num_elements() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.synthetic: regression data has f32 targets, but the loss expects ",
                     DTypeName(requirements.target_dtype), requirements.target_shape.ToString(),
                     " targets (for class ids the loss must report num_classes)"));
  }
  return std::unique_ptr<SyntheticDataset>(new SyntheticDataset(spec, requirements));
}

SyntheticDataset::SyntheticDataset(const pb::Synthetic& spec, const DataRequirements& requirements)
    : seed_(requirements.seed),
      num_samples_(spec.num_samples()),
      noise_(spec.noise()),
      num_classes_(requirements.num_classes),
      input_shape_(requirements.input_shape),
      target_shape_(requirements.target_shape),
      target_dtype_(requirements.target_dtype) {
  const int64_t features = input_shape_.num_elements();
  if (is_classification()) {
    if (num_classes_ <= kMaxCachedCenterElements / features) {
      centers_.reserve(num_classes_ * features);
      for (int64_t c = 0; c < num_classes_; ++c) {
        const std::vector<float> center = ClassCenter(c);
        centers_.insert(centers_.end(), center.begin(), center.end());
      }
    }
  } else {
    const int64_t outputs = target_shape_.num_elements();
    const double scale = 1.0 / std::sqrt(static_cast<double>(features));
    teacher_weight_.resize(outputs * features);
    RandomStream weight_stream(seed_, {kTeacherTag, 0});
    for (double& w : teacher_weight_) w = weight_stream.NextNormal() * scale;
    teacher_bias_.resize(outputs);
    RandomStream bias_stream(seed_, {kTeacherTag, 1});
    for (double& b : teacher_bias_) b = bias_stream.NextNormal() * kTeacherBiasScale;
  }
}

int64_t SyntheticDataset::ClassOf(int64_t index) const {
  GPIPE_CHECK(is_classification() && index >= 0 && index < num_samples_) << index;
  const uint64_t hash = MixKey({seed_, kLabelTag, static_cast<uint64_t>(index)});
  return static_cast<int64_t>(hash % static_cast<uint64_t>(num_classes_));
}

std::vector<float> SyntheticDataset::ClassCenter(int64_t c) const {
  GPIPE_CHECK(is_classification() && c >= 0 && c < num_classes_) << c;
  std::vector<float> center(input_shape_.num_elements());
  RandomStream stream(seed_, {kCenterTag, static_cast<uint64_t>(c)});
  for (float& value : center) value = static_cast<float>(stream.NextNormal());
  return center;
}

void SyntheticDataset::FillInput(int64_t index, std::span<float> out) const {
  RandomStream stream(seed_, {kInputTag, static_cast<uint64_t>(index)});
  if (is_classification()) {
    const int64_t c = ClassOf(index);
    std::vector<float> regenerated;
    const float* center = nullptr;
    if (!centers_.empty()) {
      center = &centers_[c * static_cast<int64_t>(out.size())];
    } else {
      regenerated = ClassCenter(c);
      center = regenerated.data();
    }
    for (size_t f = 0; f < out.size(); ++f) {
      out[f] = static_cast<float>(center[f] + noise_ * stream.NextNormal());
    }
  } else {
    for (float& x : out) x = static_cast<float>(stream.NextNormal());
  }
}

void SyntheticDataset::FillRegressionTarget(int64_t index, std::span<float> out) const {
  const int64_t features = input_shape_.num_elements();
  std::vector<float> x(features);
  FillInput(index, x);
  RandomStream noise_stream(seed_, {kTargetNoiseTag, static_cast<uint64_t>(index)});
  for (size_t t = 0; t < out.size(); ++t) {
    double pre_activation = teacher_bias_[t];
    const double* w = &teacher_weight_[t * features];
    for (int64_t f = 0; f < features; ++f) pre_activation += w[f] * x[f];
    out[t] = static_cast<float>(std::tanh(pre_activation) + noise_ * noise_stream.NextNormal());
  }
}

absl::Status SyntheticDataset::GatherInputs(std::span<const int64_t> indices, Tensor& out) const {
  RETURN_IF_ERROR(dataset_internal::CheckGather(kName, "inputs", indices, num_samples_,
                                                input_shape_, DType::kF32, out));
  const int64_t features = input_shape_.num_elements();
  float* data = out.f32();
  for (size_t i = 0; i < indices.size(); ++i) {
    FillInput(indices[i], std::span<float>(data + i * features, features));
  }
  return absl::OkStatus();
}

absl::Status SyntheticDataset::GatherTargets(std::span<const int64_t> indices, Tensor& out) const {
  RETURN_IF_ERROR(dataset_internal::CheckGather(kName, "targets", indices, num_samples_,
                                                target_shape_, target_dtype_, out));
  if (is_classification()) {
    int64_t* classes = out.data<int64_t>();
    for (size_t i = 0; i < indices.size(); ++i) classes[i] = ClassOf(indices[i]);
    return absl::OkStatus();
  }
  const int64_t outputs = target_shape_.num_elements();
  float* data = out.f32();
  for (size_t i = 0; i < indices.size(); ++i) {
    FillRegressionTarget(indices[i], std::span<float>(data + i * outputs, outputs));
  }
  return absl::OkStatus();
}

}  // namespace gpipe
