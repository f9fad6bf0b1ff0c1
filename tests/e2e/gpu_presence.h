// What the e2e tests need to know about GPUs: whether this build has the CUDA backend, and how
// many GPUs this process sees. Defined by whichever source CMake picks (gpu_presence_cuda.cc
// or gpu_presence_none.cc), so the tests hold no #if.
#ifndef GPIPE_TESTS_E2E_GPU_PRESENCE_H_
#define GPIPE_TESTS_E2E_GPU_PRESENCE_H_

namespace gpipe::testing {

bool CudaBackendBuilt();
// 0 in a build without the CUDA backend.
int VisibleGpus();

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_E2E_GPU_PRESENCE_H_
