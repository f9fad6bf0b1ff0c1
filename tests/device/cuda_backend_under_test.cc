// The conformance suite's optional backends in a build with the CUDA backend: "cuda" on GPU 0,
// and "cuda_lt", the same GPU with its products on cuBLASLt.
// Where no GPU is visible its cases skip (ctest runs them under the `gpu` label).
#include "runtime/core/check.h"
#include "runtime/device/cuda/cuda_device.h"
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {

void AppendOptionalBackendsUnderTest(std::vector<BackendUnderTest>& backends) {
  BackendUnderTest cuda{"cuda", [] {
                          absl::StatusOr<std::unique_ptr<Device>> device =
                              CreateCudaDevice(CudaDeviceOptions{.ordinal = 0});
                          GPIPE_CHECK(device.ok()) << device.status();
                          return *std::move(device);
                        }};
  // The same GPU with runtime.cuda.cublaslt_gemm: every case again with the products on
  // cuBLASLt, bias and bf16 rounding in their epilogues.
  BackendUnderTest cuda_lt{"cuda_lt", [] {
                             absl::StatusOr<std::unique_ptr<Device>> device = CreateCudaDevice(
                                 CudaDeviceOptions{.ordinal = 0, .cublaslt_gemm = true});
                             GPIPE_CHECK(device.ok()) << device.status();
                             return *std::move(device);
                           }};
  if (VisibleGpuCount() == 0) {
    cuda.skip_reason = "the CUDA backend is built but no GPU is visible to this process";
    cuda_lt.skip_reason = cuda.skip_reason;
  }
  backends.push_back(std::move(cuda));
  backends.push_back(std::move(cuda_lt));
}

}  // namespace gpipe::testing
