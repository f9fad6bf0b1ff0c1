// LayerSequence: layers applied in order as one unit, the body of a composite layer (residual,
// transformer block). Not a Layer itself: the composite owns one and adds what it does around it.
//
// Parameters and buffers are the children's, in order, named "<child>.<name>" ("conv1.weight"),
// or just "<name>" for an unnamed child (the residual halves of a transformer block).
// What the children save for backward is kept once per distinct tensor: a child saving its input
// and its predecessor saving its output keep one tensor, not two. SavedPerSample() describes
// those tensors in terms of the sequence's own input (kInput), its last child's output (kOutput)
// and everything else (kNew: intermediate outputs, the children's own kNew entries; a view such
// as flatten's output is its input's storage, counted once), so the
// planner's memory prediction of a composite is as exact as that of a plain layer.
// Intermediate outputs are kept as LayerContext::saved_activation_dtype (bf16 under
// training.precision BF16) once every child has read them in the forward, and each child's saved
// tensors are widened back to f32 for its backward call. The forward computes on the f32 values;
// a child's backward reads them rounded to bf16, which changes no bits where it reads them as
// product operands (rounded there anyway: a linear's or attention's input) and does where it reads
// them in f32 (a layer norm's input: see transformer_block.h). A child that takes bf16
// inputs (Layer::TakesBf16Inputs: a linear, an attention) gets an inner output rounded to bf16
// once, in the forward, and keeps that; so does an element-wise activation (Layer::KeepsBf16)
// whose bf16 output the next child takes as it is, which then computes on the rounded input and
// hands on its rounded output. A child that takes bf16 saved tensors (Layer::TakesBf16Saved:
// those, and composites, which widen per inner layer) gets its saved tensors as they are in the
// backward, with no f32 copy: the same bits. In the backward, an output gradient made inside the
// sequence is rounded to bf16 for such an activation (one that got bf16 in the forward) whose
// bf16 input gradient the child before it takes as it is (Layer::TakesBf16OutputGrads: a linear,
// whose products round it anyway but whose bias gradient then sums the rounded values). So under
// bf16 storage a block's wide MLP intermediates, forward and backward, live as bf16 (PyTorch
// autocast's arithmetic there). The sequence's own input, output, output gradient and input
// gradient stay f32. A child's random streams (dropout) are keyed by the composite's layer index
// and a seed mixed with the child's position, so two children never share a mask. Immutable after
// Create; all methods const (thread-compatible).
#ifndef GPIPE_LAYERS_LAYER_SEQUENCE_H_
#define GPIPE_LAYERS_LAYER_SEQUENCE_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/layer.h"

namespace gpipe {

class LayerSequence {
 public:
  // `children` non-empty, each taking f32 input of the previous child's output shape.
  static absl::StatusOr<LayerSequence> Create(std::vector<std::unique_ptr<Layer>> children);

  LayerSequence(LayerSequence&&) = default;
  LayerSequence& operator=(LayerSequence&&) = default;

  int size() const { return static_cast<int>(children_.size()); }
  const Layer& child(int i) const { return *children_[i]; }
  const Shape& input_shape() const { return children_.front()->input_shape(); }
  const Shape& output_shape() const { return children_.back()->output_shape(); }
  std::vector<ParamSpec> parameter_specs() const;
  std::vector<ParamSpec> buffer_specs() const;
  double ForwardFlopsPerSample() const;
  std::vector<SavedSpec> SavedPerSample() const { return saved_specs_; }
  // Every child's output is a view of its input.
  bool OutputAliasesInput() const;
  // Some child's work changes with the step (Layer::DependsOnStep).
  bool DependsOnStep() const;

  // Runs every child. In training, `saved` receives the tensors SavedPerSample() describes; in
  // evaluation nothing is saved.
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const;
  // Backpropagates through every child (each adding its parameter gradients); returns dx
  // (undefined when !ctx.need_input_grad).
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const;

 private:
  explicit LayerSequence(std::vector<std::unique_ptr<Layer>> children);
  // The context child `i` runs in: its buffers, its own dropout seed, and whether it may skip dx.
  LayerContext ChildContext(const LayerContext& ctx, int i) const;
  // Whether child `i` gets its input as the bf16 tensor the sequence keeps of it: under bf16
  // storage, for a child that takes bf16 inputs (bf16_input_ok_) reading an earlier child's own
  // output (not the sequence input, which is the caller's).
  bool HandsBf16To(const LayerContext& ctx, int i) const;
  // Whether child `j`'s backward gets an output gradient made inside the sequence (j is not the
  // last child) rounded to bf16: under bf16 storage, where bf16_grad_ok_[j]. The child before it
  // then gets j's bf16 input gradient as it is.
  bool HandsBf16GradTo(const LayerContext& ctx, int j) const;

  std::vector<std::unique_ptr<Layer>> children_;
  std::vector<size_t> param_offsets_;   // child i: params [param_offsets_[i], [i + 1])
  std::vector<size_t> buffer_offsets_;  // child i: buffers [buffer_offsets_[i], [i + 1])
  // slot_of_[i][k]: the position in the sequence's saved tensors of child i's k-th saved entry.
  std::vector<std::vector<int>> slot_of_;
  std::vector<SavedSpec> saved_specs_;  // one per slot
  // storage_[i]: whose allocation child i's output is: its own (i), an earlier child's when it is
  // a view of its input (flatten), or the sequence input (-1).
  std::vector<int> storage_;
  // The slots that hold an output of one child other than the last (kNew activation values).
  struct InnerOutputSlot {
    int slot;
    int producer;  // the child whose allocation it is
  };
  std::vector<InnerOutputSlot> inner_output_slots_;
  // bf16_input_ok_[i]: child i takes a bf16 input, and if it passes bf16 on (Layer::KeepsBf16),
  // so does the child after it, and so on; never a bf16 output for the sequence.
  std::vector<bool> bf16_input_ok_;
  // bf16_grad_ok_[j]: child j passes bf16 on (Layer::KeepsBf16), does so in the forward
  // (bf16_input_ok_[j]), and the child before it takes a bf16 output gradient (and passes it on
  // only to one that does, and so on); never a bf16 input gradient for the sequence.
  std::vector<bool> bf16_grad_ok_;
};

}  // namespace gpipe

#endif  // GPIPE_LAYERS_LAYER_SEQUENCE_H_
