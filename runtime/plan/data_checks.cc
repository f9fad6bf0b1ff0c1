// The data section: each source's fields and files, and model.input against the source.
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "runtime/data/token_file.h"
#include "runtime/plan/plan_defaults.h"
#include "runtime/plan/settings_check_helpers.h"
#include "runtime/plan/settings_checks.h"

namespace gpipe {
namespace {

void CheckDataFile(const std::string& field, const std::string& value, const std::string& directory,
                   const std::string& what, PlanErrors& errors) {
  if (value.empty()) {
    errors.Add(field, absl::StrCat("is missing; give the path of ", what,
                                   " (relative paths resolve against the plan's directory)"));
    return;
  }
  const std::string resolved = ResolvePlanPath(directory, value);
  std::error_code error;
  const auto status = std::filesystem::status(resolved, error);
  if (!std::filesystem::exists(status)) {
    errors.Add(field, absl::StrCat("file ", resolved,
                                   " does not exist (relative paths resolve against the plan's "
                                   "directory ",
                                   directory, "); fix the path or create the file"));
  } else if (std::filesystem::is_directory(status)) {
    errors.Add(field, absl::StrCat(resolved, " is a directory; give the path of ", what));
  }
}

// One optional data file field of the plan, for CheckEvalPair.
struct DataFileField {
  std::string field;  // "data.npy.eval_inputs"
  bool has;
  std::string value;
  std::string what;  // what the file holds, for messages
};

// A held-out pair of files: both or neither; each one given must exist.
void CheckEvalPair(const DataFileField& first, const DataFileField& second,
                   const std::string& directory, PlanErrors& errors) {
  if (first.has != second.has) {
    const DataFileField& given = first.has ? first : second;
    const DataFileField& missing = first.has ? second : first;
    errors.Add(missing.field, absl::StrCat("is missing but ", given.field, " is set (at ",
                                           errors.LocationOf(given.field),
                                           "); give both held-out files or neither"));
  }
  for (const DataFileField* file : {&first, &second}) {
    if (file->has) CheckDataFile(file->field, file->value, directory, file->what, errors);
  }
}

void CheckSynthetic(const pb::Synthetic& synthetic, PlanErrors& errors) {
  if (synthetic.num_samples() < 1) {
    errors.Add("data.synthetic.num_samples",
               absl::StrCat("is ", synthetic.num_samples(), "; it must be >= 1"));
  }
  if (!(std::isfinite(synthetic.noise()) && synthetic.noise() >= 0)) {
    errors.Add("data.synthetic.noise",
               absl::StrCat("is ", Show(synthetic.noise()), "; it must be >= 0"));
  }
  if (synthetic.eval_samples() < 0) {
    errors.Add("data.synthetic.eval_samples",
               absl::StrCat("is ", synthetic.eval_samples(),
                            "; it must be >= 0 (the held-out samples; 0: none)"));
  }
}

void CheckNpy(const pb::Npy& npy, const std::string& directory, PlanErrors& errors) {
  const std::string inputs = "a float32 .npy array [N, input shape...]";
  const std::string targets =
      "a .npy array of targets (int64 [N] class ids for softmax_cross_entropy, float32 [N, "
      "output shape...] for mse)";
  CheckDataFile("data.npy.inputs", npy.inputs(), directory, inputs, errors);
  CheckDataFile("data.npy.targets", npy.targets(), directory, targets, errors);
  CheckEvalPair({"data.npy.eval_inputs", npy.has_eval_inputs(), npy.eval_inputs(), inputs},
                {"data.npy.eval_targets", npy.has_eval_targets(), npy.eval_targets(), targets},
                directory, errors);
}

void CheckIdx(const pb::Idx& idx, const std::string& directory, PlanErrors& errors) {
  const std::string images = "an IDX file of uint8 images [N, rows, cols] (plain or gzip)";
  const std::string labels = "an IDX file of uint8 labels [N] (plain or gzip)";
  CheckDataFile("data.idx.train_images", idx.train_images(), directory, images, errors);
  CheckDataFile("data.idx.train_labels", idx.train_labels(), directory, labels, errors);
  CheckEvalPair({"data.idx.test_images", idx.has_test_images(), idx.test_images(), images},
                {"data.idx.test_labels", idx.has_test_labels(), idx.test_labels(), labels},
                directory, errors);
  if (!std::isfinite(idx.mean())) {
    errors.Add("data.idx.mean", absl::StrCat("is ", Show(idx.mean()), "; it must be finite"));
  }
  if (!Positive(idx.std())) {
    errors.Add("data.idx.std",
               absl::StrCat("is ", Show(idx.std()), "; it must be > 0 (pixels are divided by it)"));
  }
}

void CheckText(const pb::Text& text, const std::string& directory, PlanErrors& errors) {
  if (text.paths().empty()) {
    errors.Add("data.text.paths",
               "is empty; list at least one text file, e.g. paths: [\"corpus.txt\"] (relative "
               "paths resolve against the plan's directory)");
  }
  for (int i = 0; i < text.paths_size(); ++i) {
    CheckDataFile(absl::StrCat("data.text.paths[", i, "]"), text.paths(i), directory,
                  "a text file (its bytes are the tokens)", errors);
  }
  const double fraction = text.eval_fraction();
  if (!(fraction >= 0 && fraction < 1)) {
    errors.Add("data.text.eval_fraction",
               absl::StrCat("is ", Show(fraction),
                            "; it must be in [0, 1) (the share of the text held out for "
                            "evaluation; 0: none)"));
  }
}

void CheckTokens(const pb::Tokens& tokens, const std::string& directory, PlanErrors& errors) {
  const std::string what =
      "a file of little-endian token ids (data.tokens.dtype wide each, no header)";
  CheckDataFile("data.tokens.path", tokens.path(), directory, what, errors);
  const double fraction = tokens.eval_fraction();
  if (!(fraction >= 0 && fraction < 1)) {
    errors.Add("data.tokens.eval_fraction",
               absl::StrCat("is ", Show(fraction),
                            "; it must be in [0, 1) (the share of the tokens held out for "
                            "evaluation; 0: none)"));
  }
  if (tokens.path().empty()) return;
  const std::string resolved = ResolvePlanPath(directory, tokens.path());
  std::error_code error;
  const auto size = std::filesystem::file_size(resolved, error);
  const int width = TokenFile::Width(tokens.dtype());
  if (!error && size % width != 0) {
    errors.Add("data.tokens.path",
               absl::StrCat(resolved, " has ", size, " bytes, not a whole number of ",
                            pb::TokenDType_Name(tokens.dtype()), " ids (", width,
                            " bytes each); is data.tokens.dtype right, or the file cut short?"));
  }
}

// model.input must fit the data source: token ids (INT64, shape [seq_len]) come only from
// data.text and data.tokens, and they give nothing else.
void CheckInputMatchesData(const pb::Plan& plan, PlanErrors& errors) {
  const pb::Data& data = plan.data();
  if (data.source_case() == pb::Data::SOURCE_NOT_SET || !plan.has_model() ||
      !plan.model().has_input()) {
    return;
  }
  const pb::Input& input = plan.model().input();
  const bool token_ids = input.type() == pb::INT64;
  // A program's own source serves what it says it does (checked when it is opened).
  if (data.has_custom()) return;
  if (!data.has_text() && !data.has_tokens()) {
    if (token_ids) {
      const auto* source = pb::Data::descriptor()->FindFieldByNumber(data.source_case());
      errors.Add("model.input.type",
                 absl::StrCat("is INT64 (token ids) but data.", source->name(),
                              " gives float32 inputs; only data.text and data.tokens give int64 "
                              "token ids: set type: FLOAT32, or use data { text { paths: ... } } "
                              "or data { tokens { path: ... } }"));
    }
    return;
  }
  const std::string source = data.has_text() ? "data.text" : "data.tokens";
  if (!token_ids) {
    errors.Add("model.input.type",
               absl::StrCat("is ", pb::InputType_Name(input.type()), " but ", source, " (at ",
                            errors.LocationOf(source), ") gives int64 token ids",
                            data.has_text() ? " (one per byte)" : "",
                            "; set model.input { type: INT64 shape: [seq_len] } and a first "
                            "layer that embeds ",
                            data.has_text() ? "256 ids" : "the ids"));
  }
  if (input.shape_size() > 1) {
    errors.Add("model.input.shape",
               absl::StrCat("has ", input.shape_size(), " dimensions but a ", source,
                            " sample is a window of seq_len token ids; use shape: [seq_len]"));
  }
}

}  // namespace

void CheckData(const pb::Plan& plan, const std::string& directory, PlanErrors& errors) {
  if (!plan.has_data()) {
    errors.Add("data",
               "is missing; add data { synthetic {} } or data { npy { inputs: \"x.npy\" "
               "targets: \"y.npy\" } }");
    return;
  }
  const pb::Data& data = plan.data();
  switch (data.source_case()) {
    case pb::Data::kSynthetic:
      CheckSynthetic(data.synthetic(), errors);
      break;
    case pb::Data::kNpy:
      CheckNpy(data.npy(), directory, errors);
      break;
    case pb::Data::kIdx:
      CheckIdx(data.idx(), directory, errors);
      break;
    case pb::Data::kText:
      CheckText(data.text(), directory, errors);
      break;
    case pb::Data::kTokens:
      CheckTokens(data.tokens(), directory, errors);
      break;
    case pb::Data::kCustom:
      if (data.custom().name().empty()) {
        errors.Add("data.custom.name",
                   "is missing; name the data source the program registered "
                   "(include/gpipe/data_source.h)");
      }
      break;
    case pb::Data::SOURCE_NOT_SET:
      errors.Add("data",
                 "has no source; set synthetic {}, npy { inputs: ... targets: ... }, idx { "
                 "train_images: ... train_labels: ... }, text { paths: ... } or tokens { path: "
                 "... }");
      break;
  }
  CheckInputMatchesData(plan, errors);
}

void CheckTokenIds(const pb::Plan& plan, int64_t num_classes, const std::string& directory,
                   PlanErrors& errors) {
  if (!plan.data().has_tokens()) return;
  const pb::Tokens& tokens = plan.data().tokens();
  // The vocabulary: the loss's classes, and the first layer's table when it embeds the ids.
  int64_t bound = num_classes;
  std::string why = absl::StrCat("the loss scores ", num_classes, " classes");
  if (plan.model().layers_size() > 0 && plan.model().layers(0).has_embedding()) {
    const pb::Layer& first = plan.model().layers(0);
    const int64_t rows = first.embedding().num_embeddings();
    if (bound <= 0 || rows < bound) {
      bound = rows;
      why = absl::StrCat("model.layers[0] '", first.name(), "' embeds ", rows, " ids");
    }
  }
  if (bound <= 0) return;  // the data source's own check names what the model lacks
  absl::StatusOr<TokenFile> file =
      TokenFile::Open(ResolvePlanPath(directory, tokens.path()), tokens.dtype());
  absl::Status status = file.ok() ? file->CheckIdsBelow(bound, why) : file.status();
  if (!status.ok()) errors.Add("data.tokens.path", std::string(status.message()));
}

}  // namespace gpipe
