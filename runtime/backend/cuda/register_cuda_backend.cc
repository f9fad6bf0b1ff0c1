// The optional backends of a build with a CUDA compiler: CUDA.
#include "runtime/backend/backend_registry.h"
#include "runtime/backend/cuda/cuda_backend.h"

namespace gpipe {

void RegisterOptionalBackends(BackendRegistry& registry) {
  registry.Register(pb::CUDA, CreateCudaBackend);
}

}  // namespace gpipe
