// Gradient clipping's per-parameter terms (training.clip_grad_norm). Each stage reports, for each
// parameter it counts, the sum of squares of its gradient in double, keyed by the parameter's
// place in the model (global layer index, parameter index in the layer); rank 0 adds them in that
// order (GlobalGradientNorm), so the norm is the same number whatever the partition. A tied
// parameter is counted once: by its tie's first member. The terms are resolved once at set-up.
#ifndef GPIPE_RUNTIME_EXEC_GRADIENT_NORM_TERMS_H_
#define GPIPE_RUNTIME_EXEC_GRADIENT_NORM_TERMS_H_

#include <span>
#include <vector>

#include "absl/status/status.h"
#include "proto/control.pb.h"
#include "runtime/device/device.h"
#include "runtime/exec/stage_chunks.h"

namespace gpipe {

// One parameter of this stage that counts towards the global norm.
struct GradientNormTerm {
  ParameterSlot slot;
  int layer = 0;      // global layer index (model.layers)
  int parameter = 0;  // index among that layer's parameters
};

// Every parameter of `chunks`, in chunk and layer order, except tied parameters that are not
// their tie's first member.
std::vector<GradientNormTerm> GradientNormTermsFor(std::span<const ChunkRefs> chunks,
                                                   std::span<const pb::TieGroup> ties);

// Appends each term's sum of squares (in double; TensorOps::SumSquares, whose sums do not depend on
// which other parameters the stage holds) to report.grad_square_sums. The sums are taken on the
// device and read with one small copy per step (clipping only), not a copy of the gradients.
// With `replicas` > 1 (training.shard_optimizer_state) only the part of each gradient that
// replica `replica` owns counts (a term whose part is empty is left out): the replicas' reports
// together cover every element once.
absl::Status AddGradientSquareSums(std::span<const GradientNormTerm> terms,
                                   std::span<const ChunkRefs> chunks, Device& device,
                                   pb::StepReport& report, int replica = 0, int replicas = 1);

// Rank 0: the L2 norm of the terms of every report of replica 0, added in (layer, parameter)
// order. The replicas hold the same gradients after the all-reduce, so one is enough. `sharded`
// (training.shard_optimizer_state): every replica's terms, each covering its part, added in
// (layer, parameter, replica) order.
double GlobalGradientNorm(std::span<const pb::StepReport> reports, bool sharded = false);

// Multiplies every gradient of `chunks` by `scale` (clipping's C / (norm + 1e-6)).
absl::Status ScaleGradients(std::span<const ChunkRefs> chunks, Device& device, float scale);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_GRADIENT_NORM_TERMS_H_
