#include "runtime/data/open_dataset.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/data/data_source_registry.h"
#include "runtime/data/idx_dataset.h"
#include "runtime/data/npy_dataset.h"
#include "runtime/data/synthetic.h"
#include "runtime/data/text_dataset.h"
#include "runtime/data/tokens_dataset.h"

namespace gpipe {
namespace {

// FAILED_PRECONDITION for an evaluation request on a source without a held-out split.
absl::Status NoEvalSplitError(const pb::Data& data) {
  std::string remedy;
  switch (data.source_case()) {
    case pb::Data::kSynthetic:
      remedy = "set data.synthetic.eval_samples to the number of held-out samples (>= 1)";
      break;
    case pb::Data::kNpy:
      remedy = "set data.npy.eval_inputs and data.npy.eval_targets to the held-out .npy files";
      break;
    case pb::Data::kIdx:
      remedy =
          "set data.idx.test_images and data.idx.test_labels to the held-out IDX files (for "
          "Fashion-MNIST t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz)";
      break;
    case pb::Data::kText:
      remedy = "set data.text.eval_fraction in (0, 1) to hold out the end of the text";
      break;
    case pb::Data::kTokens:
      remedy = "set data.tokens.eval_fraction in (0, 1) to hold out the end of the token file";
      break;
    case pb::Data::kCustom:
      remedy = "set data.custom.eval_split: true when the source serves a held-out split";
      break;
    case pb::Data::SOURCE_NOT_SET:
      break;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("evaluation needs a held-out split but the data source has none; ", remedy));
}

}  // namespace

bool HasEvalSplit(const pb::Data& data) {
  switch (data.source_case()) {
    case pb::Data::kSynthetic:
      return data.synthetic().eval_samples() > 0;
    case pb::Data::kNpy:
      return !data.npy().eval_inputs().empty() || !data.npy().eval_targets().empty();
    case pb::Data::kIdx:
      return !data.idx().test_images().empty() || !data.idx().test_labels().empty();
    case pb::Data::kText:
      return data.text().eval_fraction() > 0;
    case pb::Data::kTokens:
      return data.tokens().eval_fraction() > 0;
    case pb::Data::kCustom:
      return data.custom().eval_split();
    case pb::Data::SOURCE_NOT_SET:
      break;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<Dataset>> OpenDataset(const pb::Data& data,
                                                     const DataRequirements& requirements,
                                                     DataSplit split,
                                                     const DataSourceRegistry* custom) {
  if (split == DataSplit::kEval && data.source_case() != pb::Data::SOURCE_NOT_SET &&
      !HasEvalSplit(data)) {
    return NoEvalSplitError(data);
  }
  switch (data.source_case()) {
    case pb::Data::kSynthetic: {
      ASSIGN_OR_RETURN(std::unique_ptr<SyntheticDataset> synthetic,
                       SyntheticDataset::Create(data.synthetic(), requirements, split));
      return std::unique_ptr<Dataset>(std::move(synthetic));
    }
    case pb::Data::kNpy: {
      ASSIGN_OR_RETURN(std::unique_ptr<NpyDataset> npy,
                       NpyDataset::Open(data.npy(), requirements, split));
      return std::unique_ptr<Dataset>(std::move(npy));
    }
    case pb::Data::kIdx: {
      ASSIGN_OR_RETURN(std::unique_ptr<IdxDataset> idx,
                       IdxDataset::Open(data.idx(), requirements, split));
      return std::unique_ptr<Dataset>(std::move(idx));
    }
    case pb::Data::kText: {
      ASSIGN_OR_RETURN(std::unique_ptr<TextDataset> text,
                       TextDataset::Open(data.text(), requirements, split));
      return std::unique_ptr<Dataset>(std::move(text));
    }
    case pb::Data::kTokens: {
      ASSIGN_OR_RETURN(std::unique_ptr<TokensDataset> tokens,
                       TokensDataset::Open(data.tokens(), requirements, split));
      return std::unique_ptr<Dataset>(std::move(tokens));
    }
    case pb::Data::kCustom: {
      // Without the program's registry the name is unknown: the empty one says so.
      if (custom == nullptr) return DataSourceRegistry().Open(data.custom(), requirements, split);
      return custom->Open(data.custom(), requirements, split);
    }
    case pb::Data::SOURCE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "data has no source; give exactly one of synthetic { ... }, npy { inputs: ... targets: ... "
      "}, idx { train_images: ... train_labels: ... }, text { paths: ... } or tokens { path: ... "
      "}");
}

}  // namespace gpipe
