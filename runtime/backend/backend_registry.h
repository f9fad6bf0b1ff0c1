// BackendRegistry: which Backend each runtime.device value builds. The program's main builds one
// with the backends compiled into it (DefaultBackends) and hands it down; no global state.
#ifndef GPIPE_RUNTIME_BACKEND_BACKEND_REGISTRY_H_
#define GPIPE_RUNTIME_BACKEND_BACKEND_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/backend/backend.h"

namespace gpipe {

class BackendRegistry {
 public:
  using Factory = std::function<absl::StatusOr<std::unique_ptr<Backend>>(const pb::Runtime&,
                                                                         const BackendContext&)>;

  // Registers the factory of `device`; a second registration of the same device replaces it.
  void Register(pb::Device device, Factory factory);
  // Records why `device` has no backend in this build, for Create's message.
  void MarkUnavailable(pb::Device device, std::string reason);
  bool Has(pb::Device device) const { return factories_.contains(device); }
  // The backend of runtime.device; UNIMPLEMENTED naming the device (and the reason
  // MarkUnavailable gave) when this build has none.
  absl::StatusOr<std::unique_ptr<Backend>> Create(const pb::Runtime& runtime,
                                                  const BackendContext& context) const;

 private:
  absl::flat_hash_map<int, Factory> factories_;
  absl::flat_hash_map<int, std::string> unavailable_;
};

// The backends built into this program: CPU and SIM always, then RegisterOptionalBackends'.
BackendRegistry DefaultBackends();

// Registers the backends this build has beyond CPU and SIM. Defined by whichever source CMake
// picks: cuda/register_cuda_backend.cc (CUDA) where a CUDA compiler was found, else
// no_cuda_backends.cc, which registers nothing and leaves an explanation for device: CUDA.
void RegisterOptionalBackends(BackendRegistry& registry);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_BACKEND_BACKEND_REGISTRY_H_
