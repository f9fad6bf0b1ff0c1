// BoundaryDType: what training.precision makes of the tensors that cross stage boundaries, and of
// the activations layers store (see runtime/exec/bf16_layer.h). BF16 keeps and sends layer
// outputs and their gradients as bf16 (half the bytes); FP32 as f32. The executor, the memory
// prediction and the tests all ask here, so a new precision is added in one place.
#ifndef GPIPE_RUNTIME_PLAN_BOUNDARY_DTYPE_H_
#define GPIPE_RUNTIME_PLAN_BOUNDARY_DTYPE_H_

#include "proto/plan.pb.h"
#include "runtime/core/dtype.h"

namespace gpipe {

DType BoundaryDType(const pb::Training& training);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_BOUNDARY_DTYPE_H_
