#include "runtime/plan/boundary_dtype.h"

namespace gpipe {

DType BoundaryDType(const pb::Training& training) {
  return training.precision() == pb::BF16 ? DType::kBF16 : DType::kF32;
}

}  // namespace gpipe
