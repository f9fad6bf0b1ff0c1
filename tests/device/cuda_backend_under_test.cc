// The conformance suite's optional backends in a build with the CUDA backend: "cuda" on GPU 0,
// and "cuda_fused", the same GPU with its fused paths on: products on cuBLASLt
// (runtime.cuda.cublaslt_gemm) and, where this build has cudnn-frontend, bf16 storage's fused
// attention on cuDNN (runtime.cuda.cudnn_attention).
// Where no GPU is visible their cases skip (ctest runs them under the `gpu` label).
#include "runtime/core/check.h"
#include "runtime/device/cuda/cuda_device.h"
#include "runtime/device/cuda/cudnn_attention.h"
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {

void AppendOptionalBackendsUnderTest(std::vector<BackendUnderTest>& backends) {
  BackendUnderTest cuda{"cuda", [] {
                          absl::StatusOr<std::unique_ptr<Device>> device =
                              CreateCudaDevice(CudaDeviceOptions{.ordinal = 0});
                          GPIPE_CHECK(device.ok()) << device.status();
                          return *std::move(device);
                        }};
  const bool cudnn = cuda::CudnnAttention::Available();
  BackendUnderTest fused{"cuda_fused", [cudnn] {
                           absl::StatusOr<std::unique_ptr<Device>> device =
                               CreateCudaDevice(CudaDeviceOptions{
                                   .ordinal = 0, .cublaslt_gemm = true, .cudnn_attention = cudnn});
                           GPIPE_CHECK(device.ok()) << device.status();
                           return *std::move(device);
                         }};
  fused.bf16_attention_rounds_f32 = !cudnn;
  if (VisibleGpuCount() == 0) {
    cuda.skip_reason = "the CUDA backend is built but no GPU is visible to this process";
    fused.skip_reason = cuda.skip_reason;
  }
  backends.push_back(std::move(cuda));
  backends.push_back(std::move(fused));
}

}  // namespace gpipe::testing
