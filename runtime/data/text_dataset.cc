#include "runtime/data/text_dataset.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/core/file_io.h"
#include "runtime/core/status_macros.h"
#include "runtime/data/gather_checks.h"

namespace gpipe {
namespace {

// floor((1 - eval_fraction) * total): the length of the training split.
int64_t TrainLength(int64_t total, double eval_fraction) {
  return static_cast<int64_t>(std::floor((1.0 - eval_fraction) * static_cast<double>(total)));
}

// The fewest bytes of text whose training split holds one window of seq_len.
int64_t BytesForOneTrainingWindow(int64_t seq_len, double eval_fraction) {
  int64_t total =
      static_cast<int64_t>(std::ceil(static_cast<double>(seq_len + 1) / (1.0 - eval_fraction)));
  while (TrainLength(total, eval_fraction) < seq_len + 1) ++total;
  while (total > 1 && TrainLength(total - 1, eval_fraction) >= seq_len + 1) --total;
  return total;
}

absl::Status CheckRequirements(const DataRequirements& requirements) {
  if (requirements.input_dtype != DType::kI64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.text gives int64 token ids (the bytes) but the model takes ",
        DTypeName(requirements.input_dtype),
        " inputs; set model.input.type: INT64 (and a first layer that embeds the ids)"));
  }
  if (requirements.input_shape.rank() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.text: a sample is a window of seq_len token ids, so model.input.shape must be "
        "[seq_len], got ",
        requirements.input_shape.ToString()));
  }
  if (requirements.num_classes <= 0 || requirements.target_dtype != DType::kI64 ||
      requirements.target_shape != requirements.input_shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.text: the targets are the next byte at each position, i64",
        requirements.input_shape.ToString(),
        " class ids, so the loss must be softmax_cross_entropy over one score per byte value at "
        "each position, but the loss expects ",
        DTypeName(requirements.target_dtype), requirements.target_shape.ToString(), " targets"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TextDataset>> TextDataset::Open(const pb::Text& spec,
                                                               const DataRequirements& requirements,
                                                               DataSplit split) {
  const double eval_fraction = spec.eval_fraction();
  if (!(eval_fraction >= 0 && eval_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.text.eval_fraction must be in [0, 1), got ", eval_fraction));
  }
  if (split == DataSplit::kEval && eval_fraction == 0) {
    return absl::FailedPreconditionError(
        "data.text.eval_fraction is 0, so there is no held-out split; set it in (0, 1) to hold "
        "out the end of the text");
  }
  if (spec.paths().empty()) {
    return absl::InvalidArgumentError("data.text.paths is empty; list at least one text file");
  }
  RETURN_IF_ERROR(CheckRequirements(requirements));
  const int64_t seq_len = requirements.input_shape.dim(0);

  std::string text;
  for (int p = 0; p < spec.paths_size(); ++p) {
    const std::string& path = spec.paths(p);
    absl::StatusOr<std::string> bytes = ReadWholeFile(path);
    if (!bytes.ok()) return WithContext(bytes.status(), absl::StrCat("data.text.paths[", p, "]"));
    if (requirements.num_classes < 256) {
      for (size_t offset = 0; offset < bytes->size(); ++offset) {
        const int value = static_cast<uint8_t>((*bytes)[offset]);
        if (value >= requirements.num_classes) {
          return absl::InvalidArgumentError(absl::StrCat(
              path, ": the byte at offset ", offset, " is ", value, " but the model has only ",
              requirements.num_classes,
              " classes; byte-level text needs a vocabulary of 256 (an embedding of 256 ids and "
              "256 output scores per position)"));
        }
      }
    }
    text += *bytes;
  }

  const int64_t total = static_cast<int64_t>(text.size());
  const int64_t train_length = TrainLength(total, eval_fraction);
  const int64_t eval_length = total - train_length;
  const int64_t train_windows = train_length - seq_len;
  if (train_windows < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.text: the training split has ", train_length, " byte(s) (the first ",
        1 - eval_fraction, " of ", total, ") but a window of seq_len ", seq_len, " needs ",
        seq_len + 1, "; give at least ", BytesForOneTrainingWindow(seq_len, eval_fraction),
        " bytes of text, or a smaller seq_len or eval_fraction"));
  }
  auto dataset = std::unique_ptr<TextDataset>(new TextDataset());
  dataset->seq_len_ = seq_len;
  dataset->window_shape_ = Shape{seq_len};
  if (split == DataSplit::kTrain) {
    dataset->name_ = "text data (training split)";
    dataset->split_text_ = text.substr(0, train_length);
    dataset->split_offset_ = 0;
    dataset->stride_ = 1;
    dataset->size_ = train_windows;
  } else {
    const int64_t eval_windows = eval_length >= 1 ? (eval_length - 1) / seq_len : 0;
    if (eval_windows < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data.text: the held-out split has ", eval_length, " byte(s) (the last ", eval_fraction,
          " of ", total, ") but a window of seq_len ", seq_len, " needs ", seq_len + 1,
          "; raise data.text.eval_fraction or give more text"));
    }
    dataset->name_ = "text data (held-out split)";
    dataset->split_text_ = text.substr(train_length);
    dataset->split_offset_ = train_length;
    dataset->stride_ = seq_len;
    dataset->size_ = eval_windows;
  }
  return dataset;
}

absl::Status TextDataset::Gather(const char* what, int64_t shift, std::span<const int64_t> indices,
                                 Tensor& out) const {
  RETURN_IF_ERROR(
      dataset_internal::CheckGather(name_, what, indices, size_, window_shape_, DType::kI64, out));
  dataset_internal::GatherRows(indices, seq_len_, out.data<int64_t>(),
                               [&](int64_t index, int64_t* to) {
                                 const char* from = split_text_.data() + index * stride_ + shift;
                                 for (int64_t k = 0; k < seq_len_; ++k) {
                                   to[k] = static_cast<uint8_t>(from[k]);
                                 }
                               });
  return absl::OkStatus();
}

absl::Status TextDataset::GatherInputs(std::span<const int64_t> indices, Tensor& out) const {
  return Gather("inputs", 0, indices, out);
}

absl::Status TextDataset::GatherTargets(std::span<const int64_t> indices, Tensor& out) const {
  return Gather("targets", 1, indices, out);
}

}  // namespace gpipe
