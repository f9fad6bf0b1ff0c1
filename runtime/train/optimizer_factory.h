// CreateOptimizer: the one place a plan's training.optimizer becomes an Optimizer (SGD, Adam,
// AdamW; each in files of its own), so the Optimizer interface knows none of them.
#ifndef GPIPE_RUNTIME_TRAIN_OPTIMIZER_FACTORY_H_
#define GPIPE_RUNTIME_TRAIN_OPTIMIZER_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/train/optimizer.h"

namespace gpipe {

// Builds the plan's optimizer; INVALID_ARGUMENT on bad hyperparameters (e.g. lr <= 0, nesterov
// without momentum), naming the field.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const pb::Optimizer& spec);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_TRAIN_OPTIMIZER_FACTORY_H_
