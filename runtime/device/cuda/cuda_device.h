// CudaDevice: one GPU as a stage sees it. Memory comes from a stream-ordered pool (cudaMallocAsync
// on a private cudaMemPool that keeps freed blocks for reuse), every byte counted by kind with
// peaks; a compute stream on which every op and copy is issued in order; a copy stream for
// host-to-device transfers from pinned memory, ordered against the compute stream by events;
// pinned host staging buffers; busy time from CUDA events. Kernels are the Cuda*Ops families,
// sharing one CudaContext (stream, cuBLAS/cuBLASLt/cuDNN handles, workspace).
//
// Errors of queued work (a kernel that faulted) surface from the next call that synchronizes
// (CopyToHost, ElapsedSeconds, Synchronize), as the Device contract says.
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUDA_DEVICE_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUDA_DEVICE_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/device/device.h"

namespace gpipe {

struct CudaDeviceOptions {
  // The CUDA device id (see runtime/backend/cuda/gpu_selection.h for how a rank picks it).
  int ordinal = 0;
  // Allocations beyond this many bytes in total fail with RESOURCE_EXHAUSTED (0: no limit other
  // than the GPU's).
  int64_t memory_limit_bytes = 0;
  // fp32 GEMMs and convolutions may use TF32 tensor cores.
  bool allow_tf32 = false;
  // Convolution algorithms timed by cuDNN (fastest deterministic one) rather than its heuristic
  // ranking (the same choice every run).
  bool measure_conv_algorithms = true;
  // GEMMs on cuBLASLt with the bias and a bf16 output's rounding in the epilogue
  // (cublaslt_gemm.h); false: cuBLAS and separate kernels.
  bool cublaslt_gemm = false;
  // The fused attention of bf16 storage on cuDNN's flash-attention engines (cudnn_attention.h);
  // false: the backend's own kernels (cuda_fused_attention.cc). CreateCudaDevice refuses true
  // in a build without cudnn-frontend.
  bool cudnn_attention = false;
};

// The number of GPUs this process can see; 0 (not an error) when there are none or no driver.
int VisibleGpuCount();

// Creates the device on options.ordinal: FAILED_PRECONDITION naming the ordinal and the
// visible count when there is no such GPU; the CUDA error otherwise.
absl::StatusOr<std::unique_ptr<Device>> CreateCudaDevice(const CudaDeviceOptions& options);

// The compute stream of a device CreateCudaDevice made, on which all its work is issued in order
// (a data channel orders its transfers after it); null for any other device.
cudaStream_t ComputeStreamOf(Device& device);
// The PCI bus id of GPU `ordinal` ("0000:1B:00.0"), which names it across processes.
absl::StatusOr<std::string> PciBusIdOf(int ordinal);
// GPU `ordinal`'s whole memory in bytes (cudaDeviceProp::totalGlobalMem).
absl::StatusOr<int64_t> TotalMemoryOf(int ordinal);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUDA_DEVICE_H_
