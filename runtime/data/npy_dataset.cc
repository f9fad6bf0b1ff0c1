#include "runtime/data/npy_dataset.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/data/gather_checks.h"
#include "runtime/data/split_files.h"

namespace gpipe {
namespace {

using dataset_internal::SplitFiles;

absl::StatusOr<SplitFiles> FilesOf(const pb::Npy& spec, DataSplit split) {
  return dataset_internal::ChooseSplitFiles(
      split, {"data.npy.inputs", "data.npy.targets", spec.inputs(), spec.targets()},
      {"data.npy.eval_inputs", "data.npy.eval_targets", spec.eval_inputs(), spec.eval_targets()},
      {.source = "data.npy",
       .eval_name = "eval",
       .inputs_what = "a float32 .npy file",
       .targets_what = "a .npy file of targets"});
}

// "[N, 784]": the expected shape of a file holding N samples of `per_sample`.
std::string ExpectedShape(const Shape& per_sample) {
  std::string dims = per_sample.ToString();  // "[784]" or "[]"
  return per_sample.rank() == 0 ? "[N]" : absl::StrCat("[N, ", dims.substr(1));
}

absl::Status CheckArrayShape(const std::string& path, const char* role, const NpyArray& array,
                             const Shape& per_sample) {
  const Shape& shape = array.shape;
  const bool matches = shape.rank() == per_sample.rank() + 1 && shape.WithoutBatch() == per_sample;
  if (!matches) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", role, " have shape ", shape.ToString(), " but the model needs ",
                     ExpectedShape(per_sample), " (N samples of ", per_sample.ToString(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<NpyDataset>> NpyDataset::Open(const pb::Npy& spec,
                                                             const DataRequirements& requirements,
                                                             DataSplit split) {
  ASSIGN_OR_RETURN(const SplitFiles files, FilesOf(spec, split));
  if (requirements.input_dtype != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.npy gives float32 inputs but the model takes ", DTypeName(requirements.input_dtype),
        " inputs (model.input.type); token ids come from data.text"));
  }
  const bool classification = requirements.num_classes > 0;
  if (classification && requirements.target_dtype != DType::kI64) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.npy: the loss has ", requirements.num_classes, " classes but expects ",
                     DTypeName(requirements.target_dtype), " targets; class ids are i64"));
  }

  absl::StatusOr<NpyArray> read_inputs = ReadNpy(files.inputs);
  if (!read_inputs.ok()) return WithContext(read_inputs.status(), files.inputs_field);
  NpyArray inputs = *std::move(read_inputs);
  if (inputs.dtype != DType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat(files.inputs,
                     ": inputs must be float32 ('<f4'), got an integer array; convert with "
                     "arr.astype(np.float32)"));
  }
  RETURN_IF_ERROR(CheckArrayShape(files.inputs, "inputs", inputs, requirements.input_shape));

  absl::StatusOr<NpyArray> read_targets = ReadNpy(files.targets);
  if (!read_targets.ok()) return WithContext(read_targets.status(), files.targets_field);
  NpyArray targets = *std::move(read_targets);
  if (targets.dtype != requirements.target_dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat(files.targets, ": targets must be ",
                     requirements.target_dtype == DType::kI64 ? "int64 class ids ('<i8' or '<i4')"
                                                              : "float32 ('<f4')",
                     " for this loss, got ",
                     targets.dtype == DType::kI64 ? "an integer" : "a float32", " array"));
  }
  RETURN_IF_ERROR(CheckArrayShape(files.targets, "targets", targets, requirements.target_shape));

  const int64_t n = inputs.shape.dim(0);
  if (targets.shape.dim(0) != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        files.targets, ": ", targets.shape.dim(0), " targets (shape ", targets.shape.ToString(),
        ") but ", files.inputs, " has ", n, " inputs (shape ", inputs.shape.ToString(),
        "); both files need the same number of samples"));
  }
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(files.inputs, ": the data set is empty (shape ",
                                                   inputs.shape.ToString(), ")"));
  }
  if (classification) {
    for (int64_t i = 0; i < static_cast<int64_t>(targets.i64.size()); ++i) {
      const int64_t c = targets.i64[i];
      if (c < 0 || c >= requirements.num_classes) {
        return absl::InvalidArgumentError(absl::StrCat(
            files.targets, ": class id ", c, " of sample ", i, " is outside [0, ",
            requirements.num_classes, ") (the model has ", requirements.num_classes, " classes)"));
      }
    }
  }
  // Validated; release what this caller will never gather.
  if (!requirements.keep_inputs) inputs.f32 = {};
  if (!requirements.keep_targets) {
    targets.f32 = {};
    targets.i64 = {};
  }
  return std::unique_ptr<NpyDataset>(new NpyDataset(files.inputs, std::move(inputs), files.targets,
                                                    std::move(targets), requirements));
}

NpyDataset::NpyDataset(std::string inputs_path, NpyArray inputs, std::string targets_path,
                       NpyArray targets, const DataRequirements& requirements)
    : inputs_path_(std::move(inputs_path)),
      targets_path_(std::move(targets_path)),
      inputs_(std::move(inputs)),
      targets_(std::move(targets)),
      size_(inputs_.shape.dim(0)),
      keep_inputs_(requirements.keep_inputs),
      keep_targets_(requirements.keep_targets),
      input_shape_(requirements.input_shape),
      target_shape_(requirements.target_shape) {}

absl::Status NpyDataset::GatherInputs(std::span<const int64_t> indices, Tensor& out) const {
  if (!keep_inputs_) {
    return absl::FailedPreconditionError(
        absl::StrCat("npy file ", inputs_path_, ": inputs were released at open (keep_inputs)"));
  }
  RETURN_IF_ERROR(dataset_internal::CheckGather(absl::StrCat("npy file ", inputs_path_), "inputs",
                                                indices, size_, input_shape_, DType::kF32, out));
  const int64_t row = input_shape_.num_elements();
  dataset_internal::GatherRows(indices, row, out.f32(), [&](int64_t index, float* to) {
    std::memcpy(to, inputs_.f32.data() + index * row, row * sizeof(float));
  });
  return absl::OkStatus();
}

absl::Status NpyDataset::GatherTargets(std::span<const int64_t> indices, Tensor& out) const {
  if (!keep_targets_) {
    return absl::FailedPreconditionError(
        absl::StrCat("npy file ", targets_path_, ": targets were released at open (keep_targets)"));
  }
  RETURN_IF_ERROR(dataset_internal::CheckGather(absl::StrCat("npy file ", targets_path_), "targets",
                                                indices, size_, target_shape_, targets_.dtype,
                                                out));
  const int64_t row = target_shape_.num_elements();
  if (targets_.dtype == DType::kI64) {
    dataset_internal::GatherRows(
        indices, row, out.data<int64_t>(), [&](int64_t index, int64_t* to) {
          std::memcpy(to, targets_.i64.data() + index * row, row * sizeof(int64_t));
        });
  } else {
    dataset_internal::GatherRows(indices, row, out.f32(), [&](int64_t index, float* to) {
      std::memcpy(to, targets_.f32.data() + index * row, row * sizeof(float));
    });
  }
  return absl::OkStatus();
}

}  // namespace gpipe
