// CudnnAttention (cudnn_attention.h) in a build without cudnn-frontend's headers: every call
// declines, so CudaAttentionOps runs its own kernels; the device refuses
// runtime.cuda.cudnn_attention up front (Available() is false).
#include "runtime/device/cuda/cudnn_attention.h"

namespace gpipe::cuda {

struct CudnnAttention::Plan {};

bool CudnnAttention::Available() { return false; }

CudnnAttention::CudnnAttention(const CudaContext& context, bool deterministic)
    : context_(context), deterministic_(deterministic) {}

CudnnAttention::~CudnnAttention() = default;

int64_t CudnnAttention::shapes_with_plan() const { return 0; }

absl::StatusOr<bool> CudnnAttention::Forward(const FusedAttentionArgs&, const Tensor&, Tensor&,
                                             Tensor&) const {
  return false;
}

absl::StatusOr<bool> CudnnAttention::Backward(const FusedAttentionArgs&, const Tensor&,
                                              const Tensor&, const Tensor&, const Tensor&,
                                              Tensor&) const {
  return false;
}

}  // namespace gpipe::cuda
