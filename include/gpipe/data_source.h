// gpipe/data_source.h — data sources a program adds to gpipe's own.
//
// Contract: a data source is a gpipe::Dataset (runtime/data/dataset.h): a fixed number of
// indexed samples, per-sample input and target shapes and dtypes, and Gather calls that fill
// host tensors with the samples at given indices (thread-safe, deterministic: every rank that
// reads data must see the same sample at the same index). The plan selects it with
//   data { custom { name: "my_source" numbers { key: "samples" value: 4096 } } }
// and its factory is called on the ranks that read data only — the first stage (inputs) and the
// last (targets) of every replica — once for the training split and, with
// data.custom.eval_split, once for the held-out split. gpipe checks what it returns against the
// model (per-sample shapes and dtypes, at least one sample) and orders the samples itself
// (data.shuffle, training.seed), so checkpoints and resume work unchanged. The data set lives as
// long as the runtime.
#ifndef GPIPE_DATA_SOURCE_H_
#define GPIPE_DATA_SOURCE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/data/dataset.h"

namespace gpipe {

// What a factory gets: the plan's settings, what the model expects, and which split to open.
class DataSourceArgs {
 public:
  DataSourceArgs(const pb::CustomData& settings, const DataRequirements& requirements,
                 DataSplit split)
      : settings_(settings), requirements_(requirements), split_(split) {}

  const std::string& name() const { return settings_.name(); }
  // Per-sample shapes and dtypes the model needs, the number of classes (> 0 for a
  // classification loss), training.seed, and which sides this rank reads.
  const DataRequirements& requirements() const { return requirements_; }
  DataSplit split() const { return split_; }
  // data.custom.numbers[key]; INVALID_ARGUMENT naming the key when it is absent.
  absl::StatusOr<double> Number(const std::string& key) const;
  double NumberOr(const std::string& key, double fallback) const;
  absl::StatusOr<std::string> String(const std::string& key) const;
  std::string StringOr(const std::string& key, const std::string& fallback) const;

 private:
  const pb::CustomData& settings_;
  const DataRequirements& requirements_;
  DataSplit split_;
};

using CustomDataFactory =
    std::function<absl::StatusOr<std::unique_ptr<Dataset>>(const DataSourceArgs& args)>;

}  // namespace gpipe

#endif  // GPIPE_DATA_SOURCE_H_
