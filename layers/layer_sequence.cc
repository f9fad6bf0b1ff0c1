#include "layers/layer_sequence.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "layers/bf16_tensors.h"
#include "runtime/core/rng.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// Mixed into a child's seed ("SEQCHILD" in ASCII), with the child's position.
constexpr uint64_t kChildSeedTag = 0x534551434849444Cull;

// Mixed precision's bf16 storage (training.precision BF16).
bool Bf16Storage(const LayerContext& ctx) {
  return ctx.product_precision == ProductPrecision::kBF16 &&
         ctx.saved_activation_dtype == DType::kBF16;
}

}  // namespace

absl::StatusOr<LayerSequence> LayerSequence::Create(std::vector<std::unique_ptr<Layer>> children) {
  if (children.empty()) return absl::InvalidArgumentError("a layer sequence needs a layer");
  for (size_t i = 0; i < children.size(); ++i) {
    if (children[i]->input_dtype() != DType::kF32) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer '", children[i]->name(), "' (", std::string(children[i]->type()),
                       ") takes ids; only a model's first layer can"));
    }
    if (i > 0 && children[i]->input_shape() != children[i - 1]->output_shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer '", children[i]->name(), "' takes ", children[i]->input_shape().ToString(),
          " but layer '", children[i - 1]->name(), "' gives ",
          children[i - 1]->output_shape().ToString()));
    }
  }
  return LayerSequence(std::move(children));
}

LayerSequence::LayerSequence(std::vector<std::unique_ptr<Layer>> children)
    : children_(std::move(children)) {
  const int last = size() - 1;
  param_offsets_.push_back(0);
  buffer_offsets_.push_back(0);
  // Whose allocation child i's output is: its own (i), an earlier child's when it is a view of
  // its input (flatten), or the sequence input (-1).
  storage_.resize(size());
  std::vector<int>& storage = storage_;
  for (int i = 0; i <= last; ++i) {
    storage[i] = !children_[i]->OutputAliasesInput() ? i : (i == 0 ? -1 : storage[i - 1]);
  }
  // Slots of the tensors produced inside the sequence, by storage: -1 the input, i child i's.
  absl::flat_hash_map<int, int> produced_slot;
  const auto slot_of_produced = [&](int producer) {
    auto [it, inserted] = produced_slot.emplace(producer, static_cast<int>(saved_specs_.size()));
    if (inserted) {
      if (producer < 0) {
        saved_specs_.push_back({SavedRef::kInput});
      } else if (producer == storage[last]) {
        saved_specs_.push_back({SavedRef::kOutput});
      } else {
        saved_specs_.push_back(
            {.ref = SavedRef::kNew,
             .activation_elements_per_sample = children_[producer]->output_shape().num_elements()});
        inner_output_slots_.push_back({.slot = it->second, .producer = producer});
      }
    }
    return it->second;
  };
  // Where bf16 may flow (the chains end at a child that does not pass bf16 on).
  bf16_input_ok_.assign(size(), false);
  for (int i = last; i >= 0; --i) {
    const Layer& child = *children_[i];
    bf16_input_ok_[i] =
        child.TakesBf16Inputs() && (!child.KeepsBf16() || (i < last && bf16_input_ok_[i + 1]));
  }
  std::vector<bool> takes_bf16_grad(size(), false);
  bf16_grad_ok_.assign(size(), false);
  for (int j = 0; j <= last; ++j) {
    const Layer& child = *children_[j];
    takes_bf16_grad[j] =
        child.TakesBf16OutputGrads() && (!child.KeepsBf16() || (j > 0 && takes_bf16_grad[j - 1]));
    // Only where its forward passed bf16 on too (so it never rounds a gradient for a layer that
    // reads its output in f32).
    bf16_grad_ok_[j] = child.KeepsBf16() && takes_bf16_grad[j] && bf16_input_ok_[j];
  }
  for (int i = 0; i <= last; ++i) {
    const Layer& layer = *children_[i];
    param_offsets_.push_back(param_offsets_.back() + layer.parameter_specs().size());
    buffer_offsets_.push_back(buffer_offsets_.back() + layer.buffer_specs().size());
    std::vector<int>& slots = slot_of_.emplace_back();
    for (const SavedSpec& spec : layer.SavedPerSample()) {
      switch (spec.ref) {
        case SavedRef::kInput:
          slots.push_back(slot_of_produced(i == 0 ? -1 : storage[i - 1]));
          break;
        case SavedRef::kOutput:
          slots.push_back(slot_of_produced(storage[i]));
          break;
        case SavedRef::kNew:
          slots.push_back(static_cast<int>(saved_specs_.size()));
          saved_specs_.push_back(spec);
          break;
      }
    }
  }
}

std::vector<ParamSpec> LayerSequence::parameter_specs() const {
  std::vector<ParamSpec> specs;
  for (const auto& child : children_) {
    for (ParamSpec spec : child->parameter_specs()) {
      if (!child->name().empty()) spec.name = absl::StrCat(child->name(), ".", spec.name);
      specs.push_back(std::move(spec));
    }
  }
  return specs;
}

std::vector<ParamSpec> LayerSequence::buffer_specs() const {
  std::vector<ParamSpec> specs;
  for (const auto& child : children_) {
    for (ParamSpec spec : child->buffer_specs()) {
      if (!child->name().empty()) spec.name = absl::StrCat(child->name(), ".", spec.name);
      specs.push_back(std::move(spec));
    }
  }
  return specs;
}

bool LayerSequence::DependsOnStep() const {
  return std::any_of(children_.begin(), children_.end(),
                     [](const auto& child) { return child->DependsOnStep(); });
}

bool LayerSequence::OutputAliasesInput() const {
  for (const auto& child : children_) {
    if (!child->OutputAliasesInput()) return false;
  }
  return true;
}

double LayerSequence::ForwardFlopsPerSample() const {
  double flops = 0.0;
  for (const auto& child : children_) flops += child->ForwardFlopsPerSample();
  return flops;
}

bool LayerSequence::HandsBf16To(const LayerContext& ctx, int i) const {
  return i > 0 && storage_[i - 1] >= 0 && bf16_input_ok_[i] && Bf16Storage(ctx);
}

bool LayerSequence::HandsBf16GradTo(const LayerContext& ctx, int j) const {
  return j < size() - 1 && bf16_grad_ok_[j] && Bf16Storage(ctx);
}

LayerContext LayerSequence::ChildContext(const LayerContext& ctx, int i) const {
  LayerContext child = ctx;
  child.seed = MixKey({ctx.seed, kChildSeedTag, static_cast<uint64_t>(i)});
  child.need_input_grad = i > 0 || ctx.need_input_grad;
  // A child writes bf16 itself what the sequence would round anyway: an output the next child
  // takes as bf16, an input gradient the child before it does.
  child.bf16_output = i + 1 < size() && HandsBf16To(ctx, i + 1);
  child.bf16_input_grad = i > 0 && HandsBf16GradTo(ctx, i - 1);
  if (!ctx.buffers.empty()) {
    child.buffers =
        ctx.buffers.subspan(buffer_offsets_[i], buffer_offsets_[i + 1] - buffer_offsets_[i]);
  }
  return child;
}

absl::StatusOr<Tensor> LayerSequence::Forward(const LayerContext& ctx,
                                              std::span<const Tensor> params, const Tensor& x,
                                              SavedTensors& saved) const {
  if (params.size() != param_offsets_.back() ||
      (ctx.buffers.size() != buffer_offsets_.back() && !ctx.buffers.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("a layer sequence with ", param_offsets_.back(), " parameters and ",
                     buffer_offsets_.back(), " buffers got ", params.size(), " and ",
                     ctx.buffers.size()));
  }
  std::vector<Tensor> slots(saved_specs_.size());
  Tensor current = x;
  for (int i = 0; i < size(); ++i) {
    SavedTensors kept;
    const Layer& child = *children_[i];
    if (HandsBf16To(ctx, i)) {
      ASSIGN_OR_RETURN(current, StoredActivation(ctx, current));
    }
    auto y = child.Forward(ChildContext(ctx, i),
                           params.subspan(param_offsets_[i], param_offsets_[i + 1] - param_offsets_[i]),
                           current, kept);
    if (!y.ok()) return WithContext(y.status(), absl::StrCat("layer '", child.name(), "'"));
    if (ctx.training) {
      if (kept.tensors.size() != slot_of_[i].size()) {
        return absl::InternalError(absl::StrCat("layer '", child.name(), "' saved ",
                                                kept.tensors.size(), " tensors, its spec says ",
                                                slot_of_[i].size()));
      }
      for (size_t k = 0; k < kept.tensors.size(); ++k) {
        slots[slot_of_[i][k]] = std::move(kept.tensors[k]);
      }
    }
    current = *std::move(y);
    // An inner output the children have all read in the forward (its storage is not the one the
    // next child reads) is kept as ctx.saved_activation_dtype from here on.
    if (ctx.training) {
      for (const InnerOutputSlot& inner : inner_output_slots_) {
        if (inner.producer < storage_[i]) {
          ASSIGN_OR_RETURN(slots[inner.slot], StoredActivation(ctx, slots[inner.slot]));
        }
      }
    }
  }
  if (ctx.training) {
    for (Tensor& slot : slots) saved.tensors.push_back(std::move(slot));
  }
  return current;
}

absl::StatusOr<Tensor> LayerSequence::Backward(const LayerContext& ctx,
                                               std::span<const Tensor> params,
                                               std::span<Tensor> grads, const SavedTensors& saved,
                                               const Tensor& dy) const {
  GPIPE_CHECK(saved.tensors.size() == saved_specs_.size())
      << "layer sequence: Backward without a matching training Forward";
  Tensor grad = dy;
  for (int i = size() - 1; i >= 0; --i) {
    const Layer& child = *children_[i];
    // The child computes on f32: what was kept as bf16 (inner outputs, a residual's f, attention's
    // qkv and O) is widened for this call, unless the child takes bf16 saved tensors as they are
    // (Layer::TakesBf16Saved: a linear, an activation, or a composite that widens per inner layer
    // itself).
    SavedTensors kept;
    for (int slot : slot_of_[i]) {
      if (child.TakesBf16Saved()) {
        kept.tensors.push_back(saved.tensors[slot]);
      } else {
        ASSIGN_OR_RETURN(kept.tensors.emplace_back(),
                         WidenedFromBf16(ctx.device, saved.tensors[slot], MemoryKind::kWorkspace));
      }
    }
    // An output gradient made inside (not dy) is rounded once for an activation that passes bf16
    // to the child before it (HandsBf16GradTo).
    if (HandsBf16GradTo(ctx, i)) {
      ASSIGN_OR_RETURN(grad, NarrowedToBf16(ctx.device, grad, MemoryKind::kActivation));
    }
    const size_t first = param_offsets_[i];
    const size_t count = param_offsets_[i + 1] - first;
    auto dx = child.Backward(ChildContext(ctx, i), params.subspan(first, count),
                             grads.subspan(first, count), kept, grad);
    if (!dx.ok()) return WithContext(dx.status(), absl::StrCat("layer '", child.name(), "'"));
    grad = *std::move(dx);
  }
  return grad;
}

}  // namespace gpipe
