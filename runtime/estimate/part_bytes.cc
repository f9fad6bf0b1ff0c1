// MeasurePartBytes (declared in activation_memory.h): the bytes of one micro-batch's tensors of
// each model part, from the layers' own SavedPerSample declarations.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/core/check.h"
#include "runtime/core/status_macros.h"
#include "runtime/estimate/activation_memory.h"
#include "runtime/exec/stage_model.h"
#include "runtime/plan/boundary_dtype.h"

namespace gpipe {
namespace {

constexpr int64_t kF32 = 4;

// What one micro-batch of a stage model saves for backward, each distinct tensor once (a layer
// saving its input saves the previous layer's output, which that layer may save as its own output
// too; a layer whose output is a view of its input, such as flatten, adds no storage). The stage
// input and output are reported as flags, not bytes.
// Layer outputs and their gradients take `activation_size` bytes an element (2 under bf16
// storage); what layers declare as new storage is counted as they declare it.
PartBytes SavedBytes(const StageModel& model, int64_t micro_batch_size, int64_t activation_size) {
  GPIPE_CHECK(model.num_layers() > 0) << "a part has at least one layer";
  PartBytes part;
  int64_t& bytes = part.saved;
  const int64_t b = micro_batch_size;
  const int n = model.num_layers();
  const int last = n - 1;
  // storage[l]: whose allocation layer l's output is: its own (l), an earlier layer's when it is
  // a view, or the stage input (-1).
  std::vector<int> storage(n);
  for (int l = 0; l < n; ++l) {
    storage[l] = !model.layer(l).OutputAliasesInput() ? l : (l == 0 ? -1 : storage[l - 1]);
  }
  const auto input_storage = [&storage](int l) { return l == 0 ? -1 : storage[l - 1]; };
  const auto bytes_of = [&model, b, activation_size](int s) {
    return model.layer(s).output_shape().num_elements() * activation_size * b;
  };
  std::vector<bool> counted(n, false);  // by storage
  for (int l = 0; l < n; ++l) {
    const Layer& layer = model.layer(l);
    for (const SavedSpec& spec : layer.SavedPerSample()) {
      const int s = spec.ref == SavedRef::kOutput  ? storage[l]
                    : spec.ref == SavedRef::kInput ? input_storage(l)
                                                   : -2;
      if (spec.ref == SavedRef::kNew) {
        bytes += spec.NewBytes(b, activation_size);
      } else if (s < 0) {
        // The stage input: boundary memory. A split backward keeps it until BackwardWeight.
        if (spec.ref == SavedRef::kInput && layer.SplitsBackward()) part.input_deferred = true;
      } else if (!counted[s]) {
        bytes += bytes_of(s);
        counted[s] = true;
      }
    }
  }
  // The last layer's output is the stage output: not part of `saved`.
  if (storage[last] >= 0 && counted[storage[last]]) {
    part.output_saved = true;
    bytes -= bytes_of(storage[last]);
  }

  // Between BackwardInput and BackwardWeight the executor keeps, for each layer that splits, its
  // saved tensors and its output gradient dy; everything else of the backward is freed. Layer
  // outputs are distinct storages (counted once however many layers save them); the stage input
  // is boundary memory and the last layer's dy is the stage's output gradient.
  std::vector<bool> kept(n, false);  // by storage
  for (int l = 0; l < n; ++l) {
    const Layer& layer = model.layer(l);
    if (!layer.SplitsBackward()) continue;
    for (const SavedSpec& spec : layer.SavedPerSample()) {
      if (spec.ref == SavedRef::kNew) part.deferred += spec.NewBytes(b, activation_size);
      const int s = spec.ref == SavedRef::kOutput ? storage[l] : input_storage(l);
      if (spec.ref != SavedRef::kNew && s >= 0) kept[s] = true;
    }
    if (l == last) {
      part.output_grad_deferred = true;
    } else {
      part.deferred += layer.output_shape().num_elements() * activation_size * b;  // its dy
    }
  }
  for (int s = 0; s < n; ++s) {
    if (kept[s]) part.deferred += bytes_of(s);
  }
  return part;
}

}  // namespace

absl::StatusOr<std::vector<PartBytes>> MeasurePartBytes(const AnalyzedPlan& plan,
                                                        const LayerRegistry& registry,
                                                        int64_t micro_batch_size) {
  const int64_t activation_size = SizeOf(BoundaryDType(plan.plan.training()));
  std::vector<PartBytes> parts;
  for (const StageInfo& info : plan.stages) {
    ASSIGN_OR_RETURN(StageModel model,
                     StageModel::Create(plan.plan.model(), info.first_layer, info.end_layer,
                                        info.input_shape, registry));
    PartBytes part = SavedBytes(model, micro_batch_size, activation_size);
    // The model's input is the data set's (counted as f32); a later part's is a layer output.
    const int64_t input_size = info.first_layer == 0 ? kF32 : activation_size;
    part.input = info.input_shape.num_elements() * input_size * micro_batch_size;
    part.output = info.output_shape.num_elements() * activation_size * micro_batch_size;
    part.loss_grad = info.output_shape.num_elements() * kF32 * micro_batch_size;
    for (const int join : model.received_skips()) {
      const Layer& layer = model.layer(join - info.first_layer);
      part.skips[join] =
          layer.skip_join()->skip_shape().num_elements() * activation_size * micro_batch_size;
    }
    for (const SkipEdge& edge : model.sent_skips()) {
      part.skips[edge.join] =
          model.layer(edge.producer - info.first_layer).output_shape().num_elements() *
          activation_size * micro_batch_size;
    }
    parts.push_back(part);
  }
  return parts;
}

}  // namespace gpipe
