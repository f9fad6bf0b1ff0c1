#include "runtime/data/text_dataset.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/file_io.h"
#include "runtime/core/status_macros.h"
#include "runtime/data/gather_checks.h"
#include "runtime/data/token_windows.h"

namespace gpipe {
namespace {

constexpr TokenSourceNames kText{.field = "data.text",
                                 .ids = "the bytes",
                                 .unit = "byte",
                                 .class_value = "byte value",
                                 .more = "bytes of text",
                                 .more_eval = "text",
                                 .whole = "text"};

}  // namespace

absl::StatusOr<std::unique_ptr<TextDataset>> TextDataset::Open(const pb::Text& spec,
                                                               const DataRequirements& requirements,
                                                               DataSplit split) {
  const double eval_fraction = spec.eval_fraction();
  RETURN_IF_ERROR(CheckEvalFraction(kText, eval_fraction, split));
  if (spec.paths().empty()) {
    return absl::InvalidArgumentError("data.text.paths is empty; list at least one text file");
  }
  RETURN_IF_ERROR(CheckTokenWindowRequirements(kText, requirements));
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

  ASSIGN_OR_RETURN(
      const TokenWindows windows,
      SplitTokenWindows(kText, static_cast<int64_t>(text.size()), seq_len, eval_fraction, split));
  auto dataset = std::unique_ptr<TextDataset>(new TextDataset());
  dataset->seq_len_ = seq_len;
  dataset->window_shape_ = Shape{seq_len};
  dataset->name_ =
      split == DataSplit::kTrain ? "text data (training split)" : "text data (held-out split)";
  dataset->split_text_ = text.substr(windows.offset, windows.split_length);
  dataset->split_offset_ = windows.offset;
  dataset->stride_ = windows.stride;
  dataset->size_ = windows.size;
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
