// Finding ids outside [0, limit) in an i64 device tensor before an op uses them as indices
// (embedding gather and scatter, cross-entropy targets). The op's contract returns the first bad
// one as a BadId status, so this is the one place these ops wait for the GPU: a check kernel, then
// one small copy of its result to the host. In training the data path has already checked the
// same ids on the host before their upload (Layer::CheckHostInput, Loss::CheckHostTargets), so
// this is a backstop for ids that reach an op another way; it still waits, which a step captured
// in a CUDA graph cannot do (issue 28 item 4: a device flag read with the step report instead).
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_ID_CHECK_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_ID_CHECK_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "runtime/core/tensor.h"
#include "runtime/device/cuda/cuda_context.h"
#include "runtime/device/ops/bad_id.h"

namespace gpipe::cuda {

// The lowest flat index whose id is outside [0, limit), with that id; nullopt when all are in
// range. `ids` is a defined i64 tensor on the context's device.
absl::StatusOr<std::optional<BadId>> FirstBadId(const CudaContext& context, const Tensor& ids,
                                                int64_t limit);

}  // namespace gpipe::cuda

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_ID_CHECK_H_
