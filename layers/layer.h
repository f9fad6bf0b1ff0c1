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
#include "runtime/device/ops/matmul_ops.h"

namespace gpipe {

// How a parameter starts out. kUniform draws from U(-bound, bound), kNormal from
// N(0, bound^2) (bound is the standard deviation).
enum class ParamInit { kZeros, kOnes, kUniform, kNormal };

struct ParamSpec {
  std::string name;  // suffix after "<layer>.": "weight", "bias", "attn.qkv.weight"
  Shape shape;
  ParamInit init = ParamInit::kZeros;
  double bound = 0.0;  // for kUniform and kNormal
  // The layer reads the parameter only as a matrix product's operand (the weight of
  // DenseForward / DenseInputGrad). Under training.precision BF16 the runtime may then hand the
  // layer a bf16 copy of it in its place, made from the f32 value once per update: the product
  // rounds its operands to bf16 anyway, so the bits are the same and the rounding is not redone
  // for every product (ParameterStore::ProductOperandsOf).
  bool product_operand = false;
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
  // The layer's buffers (see Layer::buffer_specs), in order; empty for layers without any.
  std::span<Tensor> buffers;
  // Whether a training Forward updates the buffers (batch norm's running statistics). False
  // when a re-materialized forward replays a micro-batch whose forward already updated them.
  bool update_buffers = true;
  // How matrix products and convolutions round their inputs (mixed precision:
  // training.precision BF16).
  ProductPrecision product_precision = ProductPrecision::kF32;
  // The element type a composite layer keeps the activations it saves inside in (its inner
  // layers' outputs, attention's qkv and O; see SavedSpec::activation_elements_per_sample): f32,
  // or bf16 under training.precision BF16 (runtime/exec/bf16_layer.h). They are widened to f32
  // for the backward call that reads them; statistics (norms, log-sum-exp) always stay f32.
  DType saved_activation_dtype = DType::kF32;
  // Under ProductPrecision::kBF16, whether the caller keeps Forward's output (bf16_output) or
  // Backward's input gradient (bf16_input_grad) as bf16: a layer whose product writes it (a
  // linear, attention's projections) writes it as bf16 directly, the values of rounding its f32
  // result to nearest even; every other layer returns f32 and the caller rounds it.
  bool bf16_output = false;
  bool bf16_input_grad = false;
};

// What one Forward call kept for the matching Backward (one per layer per micro-batch).
struct SavedTensors {
  std::vector<Tensor> tensors;
  void clear() { tensors.clear(); }
};

// Which tensor one entry of SavedTensors is, so a planner can predict a stage's activation
// memory per micro-batch without running it.
enum class SavedRef {
  kInput,   // the forward's input x itself (shared storage): no bytes beyond x
  kOutput,  // the returned output y itself (shared storage): no bytes beyond y
  kNew,     // storage Forward allocated only for Backward (statistics, a random key, ...)
};

// One entry of SavedTensors, in order. A kNew entry of a call on `batch` samples takes
// NewBytes(batch, activation_size) bytes; every count is 0 for kInput and kOutput.
struct SavedSpec {
  SavedRef ref;
  int64_t bytes_per_sample = 0;
  int64_t bytes_per_call = 0;  // independent of the batch (batch norm's per-channel statistics)
  // Activation values a composite keeps as LayerContext::saved_activation_dtype (an inner
  // layer's output, attention's qkv): activation_size bytes each, 4 for f32 and 2 for bf16.
  int64_t activation_elements_per_sample = 0;
  int64_t BytesPerSample(int64_t activation_size) const {
    return bytes_per_sample + activation_elements_per_sample * activation_size;
  }
  int64_t NewBytes(int64_t batch, int64_t activation_size) const {
    return BytesPerSample(activation_size) * batch + bytes_per_call;
  }
};

// Split backward for zero-bubble schedules (Qi et al. 2024): B = BackwardInput, the input
// gradient on the critical path to the previous stage, and W = BackwardWeight, the parameter
// gradients, deferred into a bubble. B and W together, in either order, give bit for bit what
// the layer's Backward gives. The runtime keeps `saved` and `dy` alive from B until W.
class SplitBackward {
 public:
  virtual ~SplitBackward() = default;
  // dx = dL/dx only (an undefined Tensor when !ctx.need_input_grad); touches no gradient.
  virtual absl::StatusOr<Tensor> BackwardInput(const LayerContext& ctx,
                                               std::span<const Tensor> params,
                                               const SavedTensors& saved,
                                               const Tensor& dy) const = 0;
  // ADDS dL/dparams into `grads` exactly as Backward does; reads only `saved` and `dy`.
  virtual absl::Status BackwardWeight(const LayerContext& ctx, std::span<Tensor> grads,
                                      const SavedTensors& saved, const Tensor& dy) const = 0;
};

// A layer that joins a second tensor into its input: the output of an earlier layer of the
// model, named by the plan's `from` (skip_add, skip_concat). The runtime calls ForwardJoin and
// BackwardJoin instead of Forward and Backward, handing in that output (kept on this stage, or
// received from the stage that computed it) and taking back its gradient. Joins have no
// parameters. Tensors are as Forward's and Backward's: f32, or bf16 under a Bf16Layer.
class SkipJoin {
 public:
  virtual ~SkipJoin() = default;
  // The plan name of the layer whose output this one reads, and that output's per-sample shape.
  virtual const std::string& skip_from() const = 0;
  virtual const Shape& skip_shape() const = 0;
  // y = join(x, skip); x is [batch, input_shape...], skip [batch, skip_shape...].
  virtual absl::StatusOr<Tensor> ForwardJoin(const LayerContext& ctx, const Tensor& x,
                                             const Tensor& skip, SavedTensors& saved) const = 0;
  struct Grads {
    Tensor dx;     // dL/dx
    Tensor dskip;  // dL/dskip
  };
  // Both input gradients from dy = dL/dy. dx has storage of its own; dskip may share dy's
  // (neither is written afterwards).
  virtual absl::StatusOr<Grads> BackwardJoin(const LayerContext& ctx, const SavedTensors& saved,
                                             const Tensor& dy) const = 0;
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
  // Element type Forward takes: f32, except for layers that read ids (embedding: i64).
  virtual DType input_dtype() const { return DType::kF32; }
  // Element type of Forward's output and of Backward's input gradient: f32, or bf16 for a layer
  // run in mixed precision (runtime/exec/bf16_layer.h), which also takes bf16 inputs and output
  // gradients where input_dtype() is f32.
  virtual DType output_dtype() const { return DType::kF32; }
  // Whether, under ProductPrecision::kBF16, Forward takes a bf16 input and the backward calls
  // bf16 saved inputs, entering them into matrix products as they are (Gemm reads bf16
  // operands): the results are those of their exact f32 widening, and a mixed-precision wrapper
  // (runtime/exec/bf16_layer.h) hands them over without an f32 copy.
  virtual bool TakesBf16Inputs() const { return false; }
  // Whether the backward calls take bf16 saved tensors as they are: the layer widens what it
  // reads in f32 itself (a composite, per inner layer: LayerSequence) or only hands it to products
  // (TakesBf16Inputs). A mixed-precision wrapper, or a composite around this layer, otherwise
  // widens every bf16 saved tensor into an f32 copy for the call.
  virtual bool TakesBf16Saved() const { return TakesBf16Inputs(); }
  // Whether, under ProductPrecision::kBF16, the backward calls take a bf16 output gradient as it
  // is: products read it as they are and a bias gradient sums its exact values, so the results
  // are those of its f32 widening (a linear).
  virtual bool TakesBf16OutputGrads() const { return false; }
  // Whether, under ProductPrecision::kBF16, bf16 passes through: a bf16 input gives a bf16 output
  // and a bf16 output gradient a bf16 input gradient, each computed in f32 on the exact widening
  // and rounded to nearest even (the element-wise activations). Such a layer takes bf16 inputs
  // and output gradients; a composite hands it bf16 only where the next layer takes bf16 too.
  virtual bool KeepsBf16() const { return false; }
  const Shape& output_shape() const { return output_shape_; }
  // Parameters in a fixed order; Forward/Backward receive tensors in this order.
  virtual std::vector<ParamSpec> parameter_specs() const { return {}; }
  // State that is not trained but changes with training (batch norm's running_mean and
  // running_var), in a fixed order: initialized like parameters, given to every call through
  // LayerContext::buffers, exported beside the parameters; it has no gradient.
  virtual std::vector<ParamSpec> buffer_specs() const { return {}; }
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

  // Checks a micro-batch of the model's input on the host, before it is uploaded (the data path,
  // runtime/exec/stage_compute.cc, calls it on the model's first layer), so nothing that runs on
  // the device waits for the host to learn of a bad input. Layers that read ids reject one
  // outside their range with the error Forward would give; every other layer accepts anything.
  // `x` is host-accessible [batch, input_shape...]; `ctx` is the context Forward will get.
  virtual absl::Status CheckHostInput(const LayerContext& ctx, const Tensor& x) const {
    return absl::OkStatus();
  }

  // Whether a training Forward returns a view of its input (the same storage: flatten, a dropout
  // of p = 0) rather than new storage. Memory planning counts such an output once, as its input.
  virtual bool OutputAliasesInput() const { return false; }

  // Whether the work a training Forward or Backward issues changes with LayerContext::step (the
  // step keys dropout's masks), not only with the values it reads: such work captured in one step
  // (runtime.cuda.graphs) would be wrong when replayed in another, so its chunk runs uncaptured.
  virtual bool DependsOnStep() const { return false; }

  // What Forward keeps in SavedTensors when training, entry by entry and in order. Forward
  // in evaluation (ctx.training == false) may keep less (dropout keeps nothing), never more.
  virtual std::vector<SavedSpec> SavedPerSample() const = 0;

  // The halves of a split backward (see SplitBackward), or nullptr when this layer does not
  // split: then its Backward computes only dx (it has no parameter gradients to defer), and the
  // runtime calls it during B.
  virtual const SplitBackward* split_backward() const { return nullptr; }
  bool SplitsBackward() const { return split_backward() != nullptr; }

  // The join interface of a skip connection (see SkipJoin), or nullptr for every other layer.
  virtual const SkipJoin* skip_join() const { return nullptr; }

 private:
  std::string name_;
  Shape input_shape_;
  Shape output_shape_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_LAYER_H_
