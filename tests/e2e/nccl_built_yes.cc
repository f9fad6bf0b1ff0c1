// A build with the NCCL transport.
#include "tests/e2e/gpu_presence.h"

namespace gpipe::testing {

bool NcclBuilt() { return true; }

}  // namespace gpipe::testing
