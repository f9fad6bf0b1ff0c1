// OpenDataset: the one place a plan's data source becomes a Dataset (synthetic, .npy, IDX, text,
// or an embedding program's custom source), training or held-out split; HasEvalSplit says whether
// a source declares the held-out one. The sources live in files of their own beside it.
#ifndef GPIPE_RUNTIME_DATA_OPEN_DATASET_H_
#define GPIPE_RUNTIME_DATA_OPEN_DATASET_H_

#include <memory>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/data/dataset.h"

namespace gpipe {

class DataSourceRegistry;

// Opens `split` of the plan's data source. Paths in `data` must already be resolved (absolute or
// relative to the working directory). Errors name the file and what is wrong (missing, bad
// header, dtype or shape not matching `requirements`). kEval on a source without a held-out split
// (see HasEvalSplit) is FAILED_PRECONDITION naming the field to set. data.custom is opened
// through `custom` (the embedding program's sources; null: none).
absl::StatusOr<std::unique_ptr<Dataset>> OpenDataset(const pb::Data& data,
                                                     const DataRequirements& requirements,
                                                     DataSplit split = DataSplit::kTrain,
                                                     const DataSourceRegistry* custom = nullptr);

// Whether the source declares a held-out split: npy eval_inputs / eval_targets, synthetic
// eval_samples > 0, idx test_images / test_labels, text eval_fraction > 0, custom eval_split.
bool HasEvalSplit(const pb::Data& data);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DATA_OPEN_DATASET_H_
