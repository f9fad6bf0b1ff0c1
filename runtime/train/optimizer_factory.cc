#include "runtime/train/optimizer_factory.h"

#include "runtime/core/status_macros.h"
#include "runtime/train/adam.h"
#include "runtime/train/sgd.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const pb::Optimizer& spec) {
  switch (spec.kind_case()) {
    case pb::Optimizer::kSgd: {
      ASSIGN_OR_RETURN(std::unique_ptr<SgdOptimizer> sgd, SgdOptimizer::Create(spec.sgd()));
      return std::unique_ptr<Optimizer>(std::move(sgd));
    }
    case pb::Optimizer::kAdam: {
      ASSIGN_OR_RETURN(std::unique_ptr<AdamOptimizer> adam, AdamOptimizer::Create(spec.adam()));
      return std::unique_ptr<Optimizer>(std::move(adam));
    }
    case pb::Optimizer::kAdamw: {
      ASSIGN_OR_RETURN(std::unique_ptr<AdamOptimizer> adamw, AdamOptimizer::Create(spec.adamw()));
      return std::unique_ptr<Optimizer>(std::move(adamw));
    }
    case pb::Optimizer::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "training.optimizer has no kind set; give exactly one of sgd { ... }, adam { ... } or "
      "adamw { ... }");
}

}  // namespace gpipe
