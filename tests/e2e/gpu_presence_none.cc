// A build without the CUDA backend: no GPU can be used, whatever the machine has.
#include "tests/e2e/gpu_presence.h"

namespace gpipe::testing {

bool CudaBackendBuilt() { return false; }
int VisibleGpus() { return 0; }

}  // namespace gpipe::testing
