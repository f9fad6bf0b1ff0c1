// BackendRegistry: which Backend each runtime.device value builds. The program's main builds one
// with the backends compiled into it (DefaultBackends) and hands it down; no global state.
#ifndef GPIPE_RUNTIME_BACKEND_BACKEND_REGISTRY_H_
#define GPIPE_RUNTIME_BACKEND_BACKEND_REGISTRY_H_

#include <functional>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/backend/backend.h"

namespace gpipe {

class BackendRegistry {
 public:
  using Factory = std::function<absl::StatusOr<std::unique_ptr<Backend>>(const pb::Runtime&)>;

  // Registers the factory of `device`; a second registration of the same device replaces it.
  void Register(pb::Device device, Factory factory);
  bool Has(pb::Device device) const { return factories_.contains(device); }
  // The backend of runtime.device; UNIMPLEMENTED naming the device when this build has none.
  absl::StatusOr<std::unique_ptr<Backend>> Create(const pb::Runtime& runtime) const;

 private:
  absl::flat_hash_map<int, Factory> factories_;
};

// The backends built into this program: CPU and SIM always (CUDA where it is built).
BackendRegistry DefaultBackends();

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_BACKEND_BACKEND_REGISTRY_H_
