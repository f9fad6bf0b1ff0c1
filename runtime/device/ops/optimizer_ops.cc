#include "runtime/device/ops/optimizer_ops.h"

#include "runtime/core/status_macros.h"
#include "runtime/device/ops/op_checks.h"

namespace gpipe {

using op_checks::DTypeIs;
using op_checks::Elements;

absl::Status OptimizerOps::Sgd(const SgdUpdate& u, Tensor& param, const Tensor& grad,
                               Tensor& momentum_buffer) const {
  const int64_t n = param.num_elements();
  RETURN_IF_ERROR(DTypeIs("Sgd", "param", param, DType::kF32));
  RETURN_IF_ERROR(Elements("Sgd", "grad", grad, DType::kF32, n));
  if (u.momentum != 0) {
    RETURN_IF_ERROR(Elements("Sgd", "momentum buffer", momentum_buffer, DType::kF32, n));
  }
  return DoSgd(u, param, grad, momentum_buffer);
}

absl::Status OptimizerOps::Adam(const AdamUpdate& u, Tensor& param, const Tensor& grad,
                                Tensor& exp_avg, Tensor& exp_avg_sq) const {
  const int64_t n = param.num_elements();
  RETURN_IF_ERROR(DTypeIs("Adam", "param", param, DType::kF32));
  RETURN_IF_ERROR(Elements("Adam", "grad", grad, DType::kF32, n));
  RETURN_IF_ERROR(Elements("Adam", "exp_avg", exp_avg, DType::kF32, n));
  RETURN_IF_ERROR(Elements("Adam", "exp_avg_sq", exp_avg_sq, DType::kF32, n));
  return DoAdam(u, param, grad, exp_avg, exp_avg_sq);
}

}  // namespace gpipe
