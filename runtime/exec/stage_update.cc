#include "runtime/exec/stage_update.h"

#include <vector>

#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"
#include "runtime/exec/gradient_norm_terms.h"
#include "runtime/exec/sharded_update.h"
#include "runtime/exec/tied_gradients.h"

namespace gpipe {

absl::Status StageUpdate::Prepare(absl::Time deadline, Tensor& non_finite_flag,
                                  pb::StepReport& report) {
  if (res_.parameter_gather != nullptr) {
    // The previous update's gather is through before this one writes the parameters (the
    // forwards waited for it already, bucket by bucket).
    RETURN_IF_ERROR(res_.parameter_gather->WaitAll(deadline));
  }
  for (const TiedGradientSum& tie : res_.tied_gradients) {
    RETURN_IF_ERROR(busy_.Begin());
    RETURN_IF_ERROR(SumTiedGradients(tie, res_.chunks, res_.device, deadline));
    RETURN_IF_ERROR(busy_.End());
  }
  const bool sharded = config_.shard_optimizer_state;
  if (sharded) {
    // Only the owned parts hold sums; together the replicas check every element once.
    ASSIGN_OR_RETURN(const std::vector<Tensor> owned,
                     OwnedGradientParts(res_.chunks, config_.replica, config_.replicas));
    RETURN_IF_ERROR(res_.device.ops().tensor.FlagNonFinite(owned, non_finite_flag));
  } else {
    for (const ChunkRefs& chunk : res_.chunks) {
      RETURN_IF_ERROR(chunk.parameters->FlagNonFiniteGrads(non_finite_flag));
    }
  }
  if (res_.gradient_norm_terms.empty()) return absl::OkStatus();
  // Gradient clipping: this stage's part of the global norm, sent with the report.
  RETURN_IF_ERROR(busy_.Begin());
  RETURN_IF_ERROR(AddGradientSquareSums(res_.gradient_norm_terms, res_.chunks, res_.device, report,
                                        sharded ? config_.replica : 0,
                                        sharded ? config_.replicas : 1));
  return busy_.End();
}

absl::Status StageUpdate::Apply(const pb::StepDecision& decision, double lr) {
  const bool apply = decision.apply();
  if (apply && decision.grad_scale() != 1) {
    RETURN_IF_ERROR(
        ScaleGradients(res_.chunks, res_.device, static_cast<float>(decision.grad_scale())));
  }
  for (const ChunkRefs& chunk : res_.chunks) {
    if (apply) {
      RETURN_IF_ERROR(chunk.optimizer->Step(res_.device, lr, chunk.parameters->values(),
                                            chunk.parameters->grads()));
    }
    RETURN_IF_ERROR(chunk.parameters->ZeroGrads());
  }
  if (config_.shard_optimizer_state && apply && res_.parameter_gather != nullptr) {
    // Every replica updated its parts; the next forward waits for them, layer by layer.
    RETURN_IF_ERROR(res_.parameter_gather->Start());
  }
  return absl::OkStatus();
}

}  // namespace gpipe
