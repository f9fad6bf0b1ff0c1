// Skip connections in a model (plan: skip_add, skip_concat): which earlier layer each join layer
// reads. Used to build a stage's layers (runtime/exec/stage_model.h) and to route the tensors
// between stages (runtime/plan/plan_program.h).
#ifndef GPIPE_LAYERS_SKIP_EDGES_H_
#define GPIPE_LAYERS_SKIP_EDGES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"

namespace gpipe {

struct SkipEdge {
  int producer = 0;  // index in model.layers of the layer whose output is read
  int join = 0;      // index of the skip_add or skip_concat layer that reads it
};

// Whether the plan entry is a skip join, and the name it reads ("" for other kinds).
bool IsSkipJoin(const pb::Layer& spec);
const std::string& SkipFromOf(const pb::Layer& spec);

// The model's skip connections, by join layer (ascending). INVALID_ARGUMENT naming the layer
// when `from` is missing, names no layer, or names the join itself or a later layer.
absl::StatusOr<std::vector<SkipEdge>> FindSkipEdges(const pb::Model& model);

}  // namespace gpipe

#endif  // GPIPE_LAYERS_SKIP_EDGES_H_
