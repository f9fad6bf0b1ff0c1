#include "runtime/data/data_source_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

std::string Registered(const std::vector<std::string>& names) {
  if (names.empty()) return "this program registers none";
  return absl::StrCat("this program registers ", absl::StrJoin(names, ", "));
}

// The data set a factory returned against what the model needs.
absl::Status CheckMatches(const std::string& name, const Dataset& dataset,
                          const DataRequirements& requirements, DataSplit split) {
  const std::string what = absl::StrCat(
      "data source '", name, "' (", split == DataSplit::kEval ? "held-out" : "training", " split)");
  if (dataset.size() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has no samples"));
  }
  if (requirements.keep_inputs && (dataset.input_shape() != requirements.input_shape ||
                                   dataset.input_dtype() != requirements.input_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " gives inputs ", DTypeName(dataset.input_dtype()), " ",
        dataset.input_shape().ToString(), " per sample but model.input is ",
        DTypeName(requirements.input_dtype), " ", requirements.input_shape.ToString()));
  }
  if (requirements.keep_targets && (dataset.target_shape() != requirements.target_shape ||
                                    dataset.target_dtype() != requirements.target_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " gives targets ", DTypeName(dataset.target_dtype()), " ",
        dataset.target_shape().ToString(), " per sample but the loss needs ",
        DTypeName(requirements.target_dtype), " ", requirements.target_shape.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DataSourceRegistry::Register(std::string name, DataSourceFactory factory) {
  if (name.empty()) return absl::InvalidArgumentError("a data source needs a name");
  if (factory == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("data source '", name, "' has no factory"));
  }
  if (factories_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("data source '", name, "' is registered twice"));
  }
  factories_.emplace(std::move(name), std::move(factory));
  return absl::OkStatus();
}

std::vector<std::string> DataSourceRegistry::names() const {
  std::vector<std::string> names;
  for (const auto& [name, factory] : factories_) names.push_back(name);
  return names;
}

absl::StatusOr<std::unique_ptr<Dataset>> DataSourceRegistry::Open(
    const pb::CustomData& settings, const DataRequirements& requirements, DataSplit split) const {
  const auto it = factories_.find(settings.name());
  if (it == factories_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("data.custom.name '", settings.name(),
                     "' is not a data source of this program (", Registered(names()),
                     "); custom sources exist only in the program that registers them "
                     "(include/gpipe/data_source.h)"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Dataset> dataset, it->second(settings, requirements, split));
  if (dataset == nullptr) {
    return absl::InternalError(absl::StrCat("data source '", settings.name(),
                                            "' returned no data set; its factory must return one "
                                            "or an error"));
  }
  RETURN_IF_ERROR(CheckMatches(settings.name(), *dataset, requirements, split));
  return dataset;
}

}  // namespace gpipe
