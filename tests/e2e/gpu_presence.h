// What the e2e tests need to know about GPUs: whether this build has the CUDA backend, and how
// many GPUs this process sees, whether it has the NCCL transport. Defined by whichever sources
// CMake picks (gpu_presence_cuda.cc or gpu_presence_none.cc; nccl_built_yes.cc or
// nccl_built_no.cc), so the tests hold no #if.
#ifndef GPIPE_TESTS_E2E_GPU_PRESENCE_H_
#define GPIPE_TESTS_E2E_GPU_PRESENCE_H_

namespace gpipe::testing {

bool CudaBackendBuilt();
// 0 in a build without the CUDA backend.
int VisibleGpus();
// Whether runtime.transport NCCL is built in (false without the CUDA backend).
bool NcclBuilt();

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_E2E_GPU_PRESENCE_H_
