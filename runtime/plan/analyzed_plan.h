// AnalyzedPlan: a validated plan with every default explicit, plus what the analysis derived
// from it: each layer's shapes, parameter count and FLOPs, and the stage partition. A value
// type; rank 0 builds it once and ships `plan` and the stages to every rank.
#ifndef GPIPE_RUNTIME_PLAN_ANALYZED_PLAN_H_
#define GPIPE_RUNTIME_PLAN_ANALYZED_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/control.pb.h"
#include "proto/plan.pb.h"
#include "runtime/core/dtype.h"
#include "layers/layer.h"
#include "runtime/core/shape.h"

namespace gpipe {

struct LayerInfo {
  std::string name;
  std::string kind;    // the plan's layer kind: "linear", "relu", ...
  Shape input_shape;   // per sample
  Shape output_shape;  // per sample
  int64_t parameters = 0;
  // Of those, the elements of parameters that only enter matrix products
  // (ParamSpec::product_operand): under training.precision BF16 each has a bf16 copy too.
  int64_t product_parameters = 0;
  double flops_per_sample = 0;  // forward + backward = 3x forward
  // Whether its backward splits into input- and weight-gradient halves (Layer::SplitsBackward).
  bool splits_backward = false;
  // Its parameters in order: full names ("fc1.weight") and how they start out.
  std::vector<std::string> parameter_names;
  std::vector<ParamSpec> parameter_specs;
  // Its buffers (Layer::buffer_specs: state that is not trained, e.g. running statistics) in
  // order: full names and specs.
  std::vector<std::string> buffer_names;
  std::vector<ParamSpec> buffer_specs;
};

// One model.ties entry, resolved: every member's layer and parameter index, and the member
// whose initialization all of them take (the first).
struct TieInfo {
  struct Member {
    std::string name;
    int layer = 0;      // index in model.layers
    int parameter = 0;  // index in that layer's parameter_specs()
  };
  std::vector<Member> members;
};

// One part of the partition. Without interleaving part s is stage s. Under INTERLEAVED_1F1B the
// model is cut into stages * virtual_stages parts and part j runs on stage j % stages as its
// chunk j / stages (Megatron-LM's mapping; see runtime/schedule/topology.h).
struct StageInfo {
  int part = 0;         // index in AnalyzedPlan::stages
  int stage = 0;        // the process (pipeline stage) that runs it
  int chunk = 0;        // which of that stage's chunks it is
  int first_layer = 0;  // layers [first_layer, end_layer) of model.layers
  int end_layer = 0;
  Shape input_shape;
  Shape output_shape;
  int64_t parameters = 0;
  int64_t product_parameters = 0;  // see LayerInfo
  double flops_per_sample = 0;     // forward + backward
  // The part of flops_per_sample in layers whose backward splits (zero-bubble schedules defer
  // their weight gradients; the rest of the backward runs whole in BackwardInput).
  double split_flops_per_sample = 0;
};

struct AnalyzedPlan {
  // Every default made explicit (scalars with a declared default in pipeline, training, runtime,
  // data and their sub-messages, the optimizer, layers and loss), data paths resolved against
  // the plan directory.
  pb::Plan plan;
  std::vector<LayerInfo> layers;
  // The partition, one entry per part in model order: pipeline.stages entries, or
  // stages * virtual_stages under INTERLEAVED_1F1B.
  std::vector<StageInfo> stages;
  // What the loss takes as the per-sample target (Loss::target_shape / target_dtype).
  Shape target_shape;
  DType target_dtype = DType::kF32;
  // The output's last dimension for softmax_cross_entropy, else 0.
  int64_t num_classes = 0;
  // model.ties, resolved.
  std::vector<TieInfo> ties;
};

// Samples in one micro-batch of one replica: global_batch / (data_parallel * micro_batches)
// (a validated plan divides evenly; 0 when a count is not positive).
int64_t MicroBatchSize(const pb::Plan& plan);

// The stages as the control plane carries them (control.proto's StageSpec).
std::vector<pb::StageSpec> ToStageSpecs(const AnalyzedPlan& plan);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_ANALYZED_PLAN_H_
