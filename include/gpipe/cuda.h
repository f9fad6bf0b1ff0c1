// gpipe/cuda.h — what a custom layer's CUDA kernels need from gpipe (only in builds with the
// CUDA backend; link gpipe::backend_cuda).
//
// Contract: every op and copy of a stage's GPU runs in issue order on one compute stream; a
// custom layer's CUDA factory builds a layer whose Forward and Backward launch their kernels on
// CudaStreamOf(ctx.device) and return without synchronizing (gpipe orders transfers, the
// optimizer and the host's reads after that stream). Tensors given to them are device memory of
// that GPU: pass DevicePointer<float>(tensor) to kernels (Tensor::f32() is for host memory and
// refuses it). examples/embed/scaled_tanh_cuda.cc is such a layer.
#ifndef GPIPE_CUDA_H_
#define GPIPE_CUDA_H_

#include <cuda_runtime_api.h>

#include "runtime/device/cuda/cuda_device.h"
#include "runtime/device/cuda/device_pointer.h"
#include "runtime/device/device.h"

namespace gpipe {

// The compute stream of a stage's GPU; null when `device` is not a GPU.
inline cudaStream_t CudaStreamOf(Device& device) { return ComputeStreamOf(device); }

}  // namespace gpipe

#endif  // GPIPE_CUDA_H_
