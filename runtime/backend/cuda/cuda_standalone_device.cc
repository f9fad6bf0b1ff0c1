// The standalone devices of a build with the CUDA backend: CUDA on the first visible GPU.
#include "absl/strings/str_cat.h"
#include "runtime/backend/standalone_device.h"
#include "runtime/device/cuda/cuda_device.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Device>> CreateOptionalStandaloneDevice(const pb::Runtime& runtime) {
  if (runtime.device() != pb::CUDA) {
    return absl::UnimplementedError(
        absl::StrCat("device ", pb::Device_Name(runtime.device()), " has no standalone device"));
  }
  return CreateCudaDevice(
      CudaDeviceOptions{.ordinal = 0,
                        .memory_limit_bytes = runtime.memory_limit_bytes(),
                        .allow_tf32 = runtime.cuda().allow_tf32(),
                        .measure_conv_algorithms = runtime.cuda().measure_conv_algorithms(),
                        .cublaslt_gemm = runtime.cuda().cublaslt_gemm(),
                        .cudnn_attention = runtime.cuda().cudnn_attention()});
}

}  // namespace gpipe
