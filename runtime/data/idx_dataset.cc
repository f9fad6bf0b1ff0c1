#include "runtime/data/idx_dataset.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/data/gather_checks.h"
#include "runtime/data/idx.h"
#include "runtime/data/split_files.h"

namespace gpipe {
namespace {

// The images are the inputs and the labels the targets.
using dataset_internal::SplitFiles;

absl::StatusOr<SplitFiles> FilesOf(const pb::Idx& spec, DataSplit split) {
  return dataset_internal::ChooseSplitFiles(
      split,
      {"data.idx.train_images", "data.idx.train_labels", spec.train_images(), spec.train_labels()},
      {"data.idx.test_images", "data.idx.test_labels", spec.test_images(), spec.test_labels()},
      {.source = "data.idx",
       .eval_name = "test",
       .inputs_what = "an IDX file of uint8 images [N, rows, cols]",
       .targets_what = "an IDX file of uint8 labels [N]"});
}

std::string DimsString(const std::vector<int64_t>& dims) { return Shape(dims).ToString(); }

absl::StatusOr<IdxArray> ReadField(const char* field, const std::string& path) {
  absl::StatusOr<IdxArray> array = ReadIdx(path);
  if (!array.ok()) return WithContext(array.status(), field);
  return array;
}

}  // namespace

absl::StatusOr<std::unique_ptr<IdxDataset>> IdxDataset::Open(const pb::Idx& spec,
                                                             const DataRequirements& requirements,
                                                             DataSplit split) {
  ASSIGN_OR_RETURN(const SplitFiles files, FilesOf(spec, split));
  if (requirements.num_classes <= 0 || requirements.target_dtype != DType::kI64 ||
      requirements.target_shape.rank() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.idx: the labels are class ids, so idx needs the softmax_cross_entropy loss, but "
        "the loss expects ",
        DTypeName(requirements.target_dtype), requirements.target_shape.ToString(), " targets"));
  }
  if (requirements.input_dtype != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.idx gives float32 images but the model takes ", DTypeName(requirements.input_dtype),
        " inputs (model.input.type); token ids come from data.text"));
  }
  if (!(std::isfinite(spec.std()) && spec.std() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.idx.std must be a finite number > 0, got ", spec.std()));
  }
  if (!std::isfinite(spec.mean())) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.idx.mean must be a finite number, got ", spec.mean()));
  }

  ASSIGN_OR_RETURN(IdxArray images, ReadField(files.inputs_field, files.inputs));
  if (images.dims.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(files.inputs, ": images have dimensions ", DimsString(images.dims),
                     " but an IDX image file is [N, rows, cols]; is this the labels file?"));
  }
  const int64_t rows = images.dims[1], cols = images.dims[2];
  const Shape channel_first{1, rows, cols};
  const Shape flat{rows * cols};
  if (requirements.input_shape != channel_first && requirements.input_shape != flat) {
    return absl::InvalidArgumentError(absl::StrCat(
        files.inputs, ": images are ", rows, "x", cols, " (dimensions ", DimsString(images.dims),
        ") but model.input.shape is ", requirements.input_shape.ToString(), "; set it to ",
        channel_first.ToString(), " or ", flat.ToString()));
  }

  ASSIGN_OR_RETURN(IdxArray labels, ReadField(files.targets_field, files.targets));
  if (labels.dims.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(files.targets, ": labels have dimensions ", DimsString(labels.dims),
                     " but an IDX label file is [N]; is this the images file?"));
  }
  const int64_t n = images.dims[0];
  if (labels.dims[0] != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(files.targets, ": ", labels.dims[0], " labels but ", files.inputs, " has ", n,
                     " images; both files need the same number of samples"));
  }
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        files.inputs, ": the data set is empty (dimensions ", DimsString(images.dims), ")"));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (labels.data[i] >= requirements.num_classes) {
      return absl::InvalidArgumentError(absl::StrCat(
          files.targets, ": label ", labels.data[i], " of sample ", i, " is outside [0, ",
          requirements.num_classes, ") (the model has ", requirements.num_classes, " classes)"));
    }
  }

  std::unique_ptr<IdxDataset> dataset(new IdxDataset());
  dataset->images_path_ = files.inputs;
  dataset->labels_path_ = files.targets;
  dataset->size_ = n;
  dataset->keep_inputs_ = requirements.keep_inputs;
  dataset->keep_targets_ = requirements.keep_targets;
  dataset->input_shape_ = requirements.input_shape;
  dataset->target_shape_ = Shape{};
  // Validated; keep only what this caller will gather.
  if (requirements.keep_inputs) dataset->pixels_ = std::move(images.data);
  if (requirements.keep_targets) dataset->labels_ = std::move(labels.data);
  for (int pixel = 0; pixel < 256; ++pixel) {
    dataset->pixel_values_[pixel] = static_cast<float>((pixel / 255.0 - spec.mean()) / spec.std());
  }
  return dataset;
}

absl::Status IdxDataset::GatherInputs(std::span<const int64_t> indices, Tensor& out) const {
  if (!keep_inputs_) {
    return absl::FailedPreconditionError(
        absl::StrCat("idx file ", images_path_, ": images were released at open (keep_inputs)"));
  }
  RETURN_IF_ERROR(dataset_internal::CheckGather(absl::StrCat("idx file ", images_path_), "inputs",
                                                indices, size_, input_shape_, DType::kF32, out));
  const int64_t row = input_shape_.num_elements();
  dataset_internal::GatherRows(indices, row, out.f32(), [&](int64_t index, float* to) {
    const uint8_t* pixels = pixels_.data() + index * row;
    for (int64_t k = 0; k < row; ++k) to[k] = pixel_values_[pixels[k]];
  });
  return absl::OkStatus();
}

absl::Status IdxDataset::GatherTargets(std::span<const int64_t> indices, Tensor& out) const {
  if (!keep_targets_) {
    return absl::FailedPreconditionError(
        absl::StrCat("idx file ", labels_path_, ": labels were released at open (keep_targets)"));
  }
  RETURN_IF_ERROR(dataset_internal::CheckGather(absl::StrCat("idx file ", labels_path_), "targets",
                                                indices, size_, target_shape_, DType::kI64, out));
  dataset_internal::GatherRows(indices, 1, out.data<int64_t>(),
                               [&](int64_t index, int64_t* to) { *to = labels_[index]; });
  return absl::OkStatus();
}

}  // namespace gpipe
