#include "runtime/coord/init_from.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The tensor of `name` in the file, or of the first member of its tie group that is there.
const HfCheckpoint::Tensor* FindOrTied(const HfCheckpoint& checkpoint, const std::string& name,
                                       const std::vector<std::vector<std::string>>& groups) {
  if (const HfCheckpoint::Tensor* tensor = checkpoint.Find(name)) return tensor;
  for (const std::vector<std::string>& group : groups) {
    if (std::find(group.begin(), group.end(), name) == group.end()) continue;
    for (const std::string& member : group) {
      if (const HfCheckpoint::Tensor* tensor = checkpoint.Find(member)) return tensor;
    }
  }
  return nullptr;
}

}  // namespace

absl::Status CheckInitFrom(const HfCheckpoint& checkpoint, const AnalyzedPlan& plan) {
  struct Expected {
    std::vector<int64_t> shape;
    const char* what;  // "parameter" or "buffer"
  };
  absl::flat_hash_map<std::string, Expected> expected;
  std::vector<std::string> order;  // the plan's order, for the first missing one
  for (const LayerInfo& layer : plan.layers) {
    for (size_t p = 0; p < layer.parameter_names.size(); ++p) {
      expected[layer.parameter_names[p]] = {layer.parameter_specs[p].shape.dims(), "parameter"};
      order.push_back(layer.parameter_names[p]);
    }
    for (size_t b = 0; b < layer.buffer_names.size(); ++b) {
      expected[layer.buffer_names[b]] = {layer.buffer_specs[b].shape.dims(), "buffer"};
      order.push_back(layer.buffer_names[b]);
    }
  }
  for (const HfCheckpoint::Tensor& tensor : checkpoint.tensors()) {
    auto it = expected.find(tensor.name);
    if (it == expected.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--init-from ", checkpoint.path(), ": tensor \"", tensor.name, "\" (in ", tensor.file,
          ") is not a parameter or buffer of the plan; name the plan's layers after the "
          "checkpoint's (e.g. model.layers.0), or remove the tensor"));
    }
    if (it->second.shape != tensor.shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("--init-from ", checkpoint.path(), ": tensor \"", tensor.name, "\" (in ",
                       tensor.file, ") has shape ", ShapeText(tensor.shape), " but the plan's ",
                       it->second.what, " is ", ShapeText(it->second.shape)));
    }
  }
  std::vector<std::vector<std::string>> groups;
  for (const TieInfo& tie : plan.ties) {
    std::vector<std::string>& group = groups.emplace_back();
    for (const TieInfo::Member& member : tie.members) group.push_back(member.name);
  }
  for (const std::string& name : order) {
    if (FindOrTied(checkpoint, name, groups) == nullptr) {
      return absl::NotFoundError(absl::StrCat("--init-from ", checkpoint.path(), ": the plan's ",
                                              expected[name].what, " \"", name,
                                              "\" is not in the checkpoint"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<NamedTensorData>> ReadInitialTensors(
    const HfCheckpoint& checkpoint, const std::vector<std::string>& names,
    const std::vector<pb::TieGroup>& ties) {
  std::vector<std::vector<std::string>> groups;
  for (const pb::TieGroup& tie : ties) {
    groups.emplace_back(tie.parameters().begin(), tie.parameters().end());
  }
  std::vector<NamedTensorData> tensors;
  for (const std::string& name : names) {
    const HfCheckpoint::Tensor* tensor = FindOrTied(checkpoint, name, groups);
    if (tensor == nullptr) {
      return absl::NotFoundError(absl::StrCat("--init-from ", checkpoint.path(), ": \"", name,
                                              "\" is not in the checkpoint"));
    }
    ASSIGN_OR_RETURN(NamedTensorData values, checkpoint.Read(tensor->name));
    values.name = name;
    tensors.push_back(std::move(values));
  }
  return tensors;
}

}  // namespace gpipe
