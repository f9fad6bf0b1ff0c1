// A build without the NCCL transport (no CUDA backend, or no NCCL at build time).
#include "tests/e2e/gpu_presence.h"

namespace gpipe::testing {

bool NcclBuilt() { return false; }

}  // namespace gpipe::testing
