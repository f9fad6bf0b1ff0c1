// The optional backends of a build without a CUDA compiler: none. device: CUDA then fails at
// start-up saying why instead of naming a device the program has never heard of.
#include "runtime/backend/backend_registry.h"

namespace gpipe {

void RegisterOptionalBackends(BackendRegistry& registry) {
  registry.MarkUnavailable(
      pb::CUDA,
      "this gpipe was built without the CUDA backend (no nvcc at build time); rebuild "
      "it on a machine with the CUDA toolkit, or run the plan with device: CPU");
}

}  // namespace gpipe
