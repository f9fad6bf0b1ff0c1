// ShardedOptimizer: the optimizer of one data-parallel replica under
// training.shard_optimizer_state. It updates only the part of each parameter this replica owns
// (ShardRange(elements, replicas, replica), runtime/core/element_range.h) through the optimizer it
// wraps, handing it views of those parts, so the wrapped optimizer allocates and keeps state for
// them only: about 1/replicas of the unsharded state. The rules are elementwise, so the owned
// elements take exactly the unsharded update; the rest of each parameter is left alone (the
// replicas' all-gather brings the other parts). A parameter whose part is empty (one smaller
// than the group belongs to the last replica whole) is not handed over. State(key) keeps one
// entry per parameter: the part's state, undefined for an empty part. Not thread-safe.
#ifndef GPIPE_RUNTIME_TRAIN_SHARDED_OPTIMIZER_H_
#define GPIPE_RUNTIME_TRAIN_SHARDED_OPTIMIZER_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/core/element_range.h"
#include "runtime/train/optimizer.h"

namespace gpipe {

// The parts replica `replica` of `replicas` owns of `values` (one range per parameter).
std::vector<ElementRange> ReplicaParts(std::span<const Tensor> values, int replica, int replicas);

class ShardedOptimizer final : public Optimizer {
 public:
  // 0 <= replica < replicas.
  ShardedOptimizer(std::unique_ptr<Optimizer> inner, int replica, int replicas);

  absl::Status Step(Device& device, double lr, std::span<Tensor> values,
                    std::span<const Tensor> grads) override;
  double base_lr() const override { return inner_->base_lr(); }
  int64_t steps() const override { return inner_->steps(); }
  std::vector<std::string> StateKeys() const override { return inner_->StateKeys(); }
  std::span<const Tensor> State(int key) const override;
  // `state`: per key, one tensor per parameter holding its part's state (shaped like
  // ElementView of the part), undefined for an empty part.
  absl::Status Restore(int64_t steps, std::vector<std::vector<Tensor>> state) override;

  int replica() const { return replica_; }
  int replicas() const { return replicas_; }

 private:
  // state_[key][i] from the wrapped optimizer's state of the non-empty parts.
  void CollectState();

  std::unique_ptr<Optimizer> inner_;
  int replica_;
  int replicas_;
  std::vector<bool> owns_;  // per parameter: a non-empty part (from the first Step or Restore)
  std::vector<std::vector<Tensor>> state_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_TRAIN_SHARDED_OPTIMIZER_H_
