#include "runtime/backend/backend_registry.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/sim/sim_backend.h"

namespace gpipe {

BackendRegistry DefaultBackends() {
  BackendRegistry registry;
  registry.Register(pb::CPU, CreateCpuBackend);
  registry.Register(pb::SIM, CreateSimBackend);
  RegisterOptionalBackends(registry);
  return registry;
}

}  // namespace gpipe
