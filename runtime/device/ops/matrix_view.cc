#include "runtime/device/ops/matmul_ops.h"

namespace gpipe {

MatrixView WholeMatrix(const Tensor& tensor, int64_t rows, int64_t cols) {
  return MatrixView{.tensor = tensor, .offset = 0, .rows = rows, .cols = cols, .ld = cols};
}

}  // namespace gpipe
