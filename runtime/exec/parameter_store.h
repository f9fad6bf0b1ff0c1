// ParameterStore: the parameters of one stage and their accumulated gradients, in layer order,
// named as PyTorch names them ("fc1.weight"). Values are initialized from (seed, global layer
// index, parameter index) so they do not depend on the partition; gradients start at zero and
// accumulate over micro-batches until ZeroGrads. Layer buffers (batch norm's running statistics)
// live here too: initialized the same way (after the layer's parameters in its index order),
// exported and imported beside the parameters, never given gradients or optimizer updates.
// Every value lives on the stage's device and is touched only through its Ops and copies, so the
// store is the same on every backend (a simulated device's tensors hold no values: its ops
// compute nothing and Export fails).
// Under training.precision BF16 the store also keeps a bf16 copy of every parameter that only
// enters matrix products (ParamSpec::product_operand), counted as parameter memory. A copy is
// made again from the f32 value the first time a layer's operands are asked for after the values
// may have changed (mutable access to values(), Import): once per update, not per product, with
// the same bits as the rounding a bf16 product does of an f32 operand.
#ifndef GPIPE_RUNTIME_EXEC_PARAMETER_STORE_H_
#define GPIPE_RUNTIME_EXEC_PARAMETER_STORE_H_

#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/control.pb.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"
#include "runtime/exec/stage_model.h"

namespace gpipe {

class ParameterStore {
 public:
  // Members of `ties` other than the first are initialized as the first one is (its init kind,
  // bound and random stream), so tied parameters start equal on whichever stage they live.
  // `bf16_product_copies`: keep the bf16 copies (training.precision BF16).
  static absl::StatusOr<ParameterStore> Create(Device& device, const StageModel& model,
                                               uint64_t seed,
                                               std::span<const pb::TieGroup> ties = {},
                                               bool bf16_product_copies = false);

  // Parameters of local layer `local_layer`, in its parameter_specs() order.
  std::span<const Tensor> values_of(int local_layer) const;
  // The same parameters as the layer's calls take them: each product operand's bf16 copy (made
  // again first when the values may have changed since it was made), the f32 value for every
  // other parameter and for all of them without bf16 copies. Valid until the next call for the
  // layer.
  absl::StatusOr<std::span<const Tensor>> ProductOperandsOf(int local_layer);
  std::span<Tensor> grads_of(int local_layer);
  // Buffers of local layer `local_layer`, in its buffer_specs() order.
  std::span<Tensor> buffers_of(int local_layer);
  // All parameters of the stage, in order (for the optimizer). Whoever takes them mutable may
  // write them: the bf16 copies are made again before their next use.
  std::span<Tensor> values() {
    copies_stale_.assign(copies_stale_.size(), true);
    return values_;
  }
  std::span<const Tensor> values() const { return values_; }
  std::span<const Tensor> grads() const { return grads_; }
  // The gradients to modify in place (gradient clipping's scale).
  std::span<Tensor> mutable_grads() { return grads_; }

  absl::Status ZeroGrads();
  // Sets `flag` (f32 [1] on the device) to 1 if any gradient element is NaN or infinite.
  absl::Status FlagNonFiniteGrads(Tensor& flag) const;

  // Parameter names, in values() order ("fc1.weight").
  const std::vector<std::string>& names() const { return names_; }
  // Buffer names, in layer order ("bn1.running_mean").
  const std::vector<std::string>& buffer_names() const { return buffer_names_; }
  Device& device() const { return *device_; }

  // Host copies of every parameter and then every buffer, by name (for export).
  absl::StatusOr<std::vector<NamedTensorData>> Export() const;
  // Overwrites parameters and buffers from `tensors` by name. Every parameter and buffer of this
  // stage must be present with the same shape; names belonging to other stages are ignored.
  absl::Status Import(const std::vector<NamedTensorData>& tensors);

 private:
  explicit ParameterStore(Device& device) : device_(&device) {}
  Device* device_;
  std::vector<Tensor> values_;
  std::vector<Tensor> grads_;
  std::vector<std::string> names_;
  std::vector<size_t> layer_offsets_;  // values_[layer_offsets_[l] .. layer_offsets_[l + 1])
  // Parallel to values_: the bf16 copy of a product operand (undefined for other parameters and
  // without copies), and what ProductOperandsOf hands out (the copy, else the value).
  std::vector<Tensor> copies_;
  std::vector<Tensor> operands_;
  std::vector<bool> copies_stale_;  // per layer
  std::vector<Tensor> buffers_;
  std::vector<std::string> buffer_names_;
  std::vector<size_t> buffer_offsets_;  // buffers_[buffer_offsets_[l] .. buffer_offsets_[l + 1])
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_PARAMETER_STORE_H_
