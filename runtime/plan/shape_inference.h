// Model checks and shape inference: validates model.input, the layers (names, kinds, configs)
// and the loss, building each layer through the LayerRegistry with its input shape to learn its
// output shape, parameters and FLOPs. Errors go into PlanErrors. Internal to the plan module.
#ifndef GPIPE_RUNTIME_PLAN_SHAPE_INFERENCE_H_
#define GPIPE_RUNTIME_PLAN_SHAPE_INFERENCE_H_

#include <vector>

#include "layers/registry.h"
#include "proto/plan.pb.h"
#include "runtime/plan/analyzed_plan.h"
#include "runtime/plan/plan_errors.h"

namespace gpipe {

struct ModelShapes {
  // One entry per layer when `complete`; up to the first layer that failed otherwise.
  std::vector<LayerInfo> layers;
  bool complete = false;
  Shape target_shape;
  DType target_dtype = DType::kF32;
  int64_t num_classes = 0;
  std::vector<TieInfo> ties;  // model.ties, resolved (when `complete`)
};

// Reports every model problem into `errors`. Inference stops at the first layer that cannot be
// built (later shapes are unknown), but name checks cover every layer.
ModelShapes InferModelShapes(const pb::Plan& plan, const LayerRegistry& registry,
                             PlanErrors& errors);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_SHAPE_INFERENCE_H_
