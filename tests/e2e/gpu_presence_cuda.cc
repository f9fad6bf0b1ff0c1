// A build with the CUDA backend: the GPUs the CUDA runtime shows this process.
#include "runtime/device/cuda/cuda_device.h"
#include "tests/e2e/gpu_presence.h"

namespace gpipe::testing {

bool CudaBackendBuilt() { return true; }
int VisibleGpus() { return VisibleGpuCount(); }

}  // namespace gpipe::testing
