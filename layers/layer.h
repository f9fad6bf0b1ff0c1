// Layer: one named step of the model's sequence, as a pure function of its parameters.
//
// A Layer holds its configuration and per-sample shapes, fixed at construction, and no tensors:
// parameters and their gradients live in the stage's ParameterStore and are passed in, and
// whatever Forward saves for Backward goes into a SavedTensors the executor owns per
// micro-batch. So one Layer object serves every micro-batch, re-materialization simply drops
// and rebuilds SavedTensors, and all methods are const (thread-compatible).
//
// Shapes passed to Forward/Backward carry a leading batch dimension; input_shape() and
// output_shape() do not. Parameter layouts follow PyTorch.
#ifndef GPIPE_LAYERS_LAYER_H_
#define GPIPE_LAYERS_LAYER_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/core/shape.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"

namespace gpipe {

// How a parameter starts out. Uniform draws from U(-bound, bound).
enum class ParamInit { kZeros, kOnes, kUniform };

struct ParamSpec {
  std::string name;  // suffix after "<layer>.": "weight", "bias"
  Shape shape;
  ParamInit init = ParamInit::kZeros;
  double bound = 0.0;  // for kUniform
};

// Everything a layer call needs besides tensors.
struct LayerContext {
  Device& device;
  bool training = true;
  uint64_t seed = 0;
  int64_t step = 0;
  int micro_batch = 0;
  // Index of the micro-batch's first sample within the mini-batch. Randomness that should not
  // depend on how the mini-batch is split (dropout) is keyed by step and layer and positioned by
  // sample_offset, so M micro-batches draw exactly what one whole batch would.
  int64_t sample_offset = 0;
  int layer_index = 0;          // index in model.layers (global, not per stage)
  bool need_input_grad = true;  // false for the model's first layer: Backward may skip dx
};

// What one Forward call kept for the matching Backward (one per layer per micro-batch).
struct SavedTensors {
  std::vector<Tensor> tensors;
  void clear() { tensors.clear(); }
};

class Layer {
 public:
  Layer(std::string name, Shape input_shape, Shape output_shape)
      : name_(std::move(name)),
        input_shape_(std::move(input_shape)),
        output_shape_(std::move(output_shape)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  // The plan's layer kind: "linear", "relu", ...
  virtual std::string_view type() const = 0;
  // Per-sample shapes.
  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const { return output_shape_; }
  // Parameters in a fixed order; Forward/Backward receive tensors in this order.
  virtual std::vector<ParamSpec> parameter_specs() const { return {}; }
  // Multiply-adds x2 (FLOPs) of one sample's forward; backward is counted as twice that.
  virtual double ForwardFlopsPerSample() const = 0;

  // y = f(x; params). x is [batch, input_shape...]. Saves into `saved` what Backward needs.
  virtual absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                         const Tensor& x, SavedTensors& saved) const = 0;
  // Given dy = dL/dy, ADDS dL/dparams into `grads` (same order and shapes as params) and
  // returns dx = dL/dx (an undefined Tensor when !ctx.need_input_grad).
  virtual absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                          std::span<Tensor> grads, const SavedTensors& saved,
                                          const Tensor& dy) const = 0;

 private:
  std::string name_;
  Shape input_shape_;
  Shape output_shape_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_LAYER_H_
