#include "runtime/data/synthetic.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/data/gather_checks.h"

namespace gpipe {
namespace {

// Stream tags: distinct key words so the streams of centers, labels, inputs, the teacher and the
// target noise never coincide.
constexpr uint64_t kCenterTag = 0x53594E43454E5452ull;       // "SYNCENTR"
constexpr uint64_t kLabelTag = 0x53594E4C4142454Cull;        // "SYNLABEL"
constexpr uint64_t kInputTag = 0x53594E494E505554ull;        // "SYNINPUT"
constexpr uint64_t kTeacherTag = 0x53594E5445414348ull;      // "SYNTEACH"
constexpr uint64_t kTargetNoiseTag = 0x53594E4E4F495345ull;  // "SYNNOISE"
// Added to the key of the evaluation split's sample streams (not to the centers or the teacher).
constexpr uint64_t kEvalSplitTag = 0x53594E4556414C31ull;  // "SYNEVAL1"

constexpr double kTeacherBiasScale = 0.5;
// sum of a[i] * b[i] in float over kLanes interleaved partial sums (which the compiler keeps in
// vector registers), combined in double: a fixed order, so the same bits on every run, at a
// cost small next to a model that reads the sample.
double Dot(const float* __restrict a, const float* __restrict b, int64_t n) {
  constexpr int kLanes = 16;
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += a[i + l] * b[i + l];
  }
  double sum = 0.0;
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  for (; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

// How gather errors name the data set.
const char* Name(DataSplit split) {
  return split == DataSplit::kTrain ? "synthetic data" : "synthetic data (held-out split)";
}

}  // namespace

absl::StatusOr<std::unique_ptr<SyntheticDataset>> SyntheticDataset::Create(
    const pb::Synthetic& spec, const DataRequirements& requirements, DataSplit split) {
  if (spec.num_samples() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.synthetic.num_samples must be >= 1, got ", spec.num_samples()));
  }
  if (spec.eval_samples() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.synthetic.eval_samples must be >= 0, got ", spec.eval_samples()));
  }
  if (split == DataSplit::kEval && spec.eval_samples() == 0) {
    return absl::FailedPreconditionError(
        "data.synthetic.eval_samples is 0, so there is no held-out split to evaluate on; set it "
        "to the number of held-out samples (>= 1)");
  }
  if (requirements.input_dtype != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.synthetic makes f32 inputs but the model takes ", DTypeName(requirements.input_dtype),
        " inputs (model.input.type); token ids come from data.text"));
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
  return std::unique_ptr<SyntheticDataset>(new SyntheticDataset(spec, requirements, split));
}

SyntheticDataset::SyntheticDataset(const pb::Synthetic& spec, const DataRequirements& requirements,
                                   DataSplit split)
    : seed_(requirements.seed),
      split_(split),
      num_samples_(split == DataSplit::kEval ? spec.eval_samples() : spec.num_samples()),
      noise_(spec.noise()),
      num_classes_(requirements.num_classes),
      input_shape_(requirements.input_shape),
      target_shape_(requirements.target_shape),
      target_dtype_(requirements.target_dtype),
      input_rows_(num_samples_, input_shape_.num_elements(), kRowCacheBytes),
      target_rows_(requirements.num_classes > 0 ? 0 : num_samples_, target_shape_.num_elements(),
                   kRowCacheBytes) {
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
    for (float& w : teacher_weight_) w = static_cast<float>(weight_stream.NextNormal() * scale);
    teacher_bias_.resize(outputs);
    RandomStream bias_stream(seed_, {kTeacherTag, 1});
    for (double& b : teacher_bias_) b = bias_stream.NextNormal() * kTeacherBiasScale;
  }
}

RandomStream SyntheticDataset::SampleStream(uint64_t tag, int64_t index) const {
  const uint64_t sample = static_cast<uint64_t>(index);
  return split_ == DataSplit::kTrain ? RandomStream(seed_, {tag, sample})
                                     : RandomStream(seed_, {tag, kEvalSplitTag, sample});
}

int64_t SyntheticDataset::ClassOf(int64_t index) const {
  GPIPE_CHECK(is_classification() && index >= 0 && index < num_samples_) << index;
  const uint64_t sample = static_cast<uint64_t>(index);
  const uint64_t hash = split_ == DataSplit::kTrain
                            ? MixKey({seed_, kLabelTag, sample})
                            : MixKey({seed_, kLabelTag, kEvalSplitTag, sample});
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
  RandomStream stream = SampleStream(kInputTag, index);
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
  RandomStream noise_stream = SampleStream(kTargetNoiseTag, index);
  for (size_t t = 0; t < out.size(); ++t) {
    const float* w = &teacher_weight_[t * features];
    out[t] = static_cast<float>(std::tanh(teacher_bias_[t] + Dot(w, x.data(), features)) +
                                noise_ * noise_stream.NextNormal());
  }
}

absl::Status SyntheticDataset::GatherInputs(std::span<const int64_t> indices, Tensor& out) const {
  RETURN_IF_ERROR(dataset_internal::CheckGather(Name(split_), "inputs", indices, num_samples_,
                                                input_shape_, DType::kF32, out));
  const int64_t features = input_shape_.num_elements();
  dataset_internal::GatherRows(indices, features, out.f32(), [&](int64_t index, float* row) {
    input_rows_.Get(index, row, [&](int64_t i, float* values) {
      FillInput(i, std::span<float>(values, features));
    });
  });
  return absl::OkStatus();
}

absl::Status SyntheticDataset::GatherTargets(std::span<const int64_t> indices, Tensor& out) const {
  RETURN_IF_ERROR(dataset_internal::CheckGather(Name(split_), "targets", indices, num_samples_,
                                                target_shape_, target_dtype_, out));
  if (is_classification()) {
    dataset_internal::GatherRows(indices, 1, out.data<int64_t>(),
                                 [&](int64_t index, int64_t* row) { *row = ClassOf(index); });
    return absl::OkStatus();
  }
  const int64_t outputs = target_shape_.num_elements();
  dataset_internal::GatherRows(indices, outputs, out.f32(), [&](int64_t index, float* row) {
    target_rows_.Get(index, row, [&](int64_t i, float* values) {
      FillRegressionTarget(i, std::span<float>(values, outputs));
    });
  });
  return absl::OkStatus();
}

}  // namespace gpipe
