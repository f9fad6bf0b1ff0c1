// DataSourceRegistry: the data sources an embedding program adds (plan: data { custom { name }}),
// by name. An ordinary object, not a global: the program fills one and hands it to the runtime
// (include/gpipe/data_source.h); OpenDataset consults it for data.custom. Registering is not
// thread-safe; lookups on a filled registry are.
#ifndef GPIPE_RUNTIME_DATA_DATA_SOURCE_REGISTRY_H_
#define GPIPE_RUNTIME_DATA_DATA_SOURCE_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/data/dataset.h"

namespace gpipe {

// Opens one split of a custom source. `requirements` says what the model expects (shapes,
// dtypes, the number of classes, the seed) and which sides this rank reads; the factory checks
// its samples against it (OpenDataset checks the result's shapes and dtypes again) and fails
// with a message naming what is wrong. Called on the ranks that read data only, once per split.
using DataSourceFactory = std::function<absl::StatusOr<std::unique_ptr<Dataset>>(
    const pb::CustomData& settings, const DataRequirements& requirements, DataSplit split)>;

class DataSourceRegistry {
 public:
  // ALREADY_EXISTS when `name` is taken; INVALID_ARGUMENT for an empty name or a null factory.
  absl::Status Register(std::string name, DataSourceFactory factory);
  bool Contains(const std::string& name) const { return factories_.contains(name); }
  std::vector<std::string> names() const;

  // Opens `split` of `settings.name`'s source. FAILED_PRECONDITION naming the registered
  // sources when the name is unknown; the factory's error otherwise; INVALID_ARGUMENT when the
  // data set it returns does not match `requirements` (per-sample shapes and dtypes).
  absl::StatusOr<std::unique_ptr<Dataset>> Open(const pb::CustomData& settings,
                                                const DataRequirements& requirements,
                                                DataSplit split) const;

 private:
  std::map<std::string, DataSourceFactory> factories_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DATA_DATA_SOURCE_REGISTRY_H_
