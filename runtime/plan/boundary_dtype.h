// BoundaryDType: what training.precision makes of the tensors that cross stage boundaries.
// BF16 sends activations and their gradients as bf16 (half the bytes, lossless: the values are
// already rounded to bf16); FP32 sends f32. The executor, the memory prediction and the tests
// all ask here, so a new precision is added in one place.
#ifndef GPIPE_RUNTIME_PLAN_BOUNDARY_DTYPE_H_
#define GPIPE_RUNTIME_PLAN_BOUNDARY_DTYPE_H_

#include "proto/plan.pb.h"
#include "runtime/core/dtype.h"

namespace gpipe {

DType BoundaryDType(const pb::Training& training);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_BOUNDARY_DTYPE_H_
