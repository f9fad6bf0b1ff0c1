#include "runtime/plan/shape_inference.h"

#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "layers/skip_edges.h"

namespace gpipe {
namespace {

std::string LayerPath(int index) { return absl::StrCat("model.layers[", index, "]"); }

// "layer 'fc1'", or "the unnamed layer" (its name is reported missing separately).
std::string LayerLabel(const pb::Layer& spec) {
  return spec.name().empty() ? "the unnamed layer" : absl::StrCat("layer '", spec.name(), "'");
}

// The element count of `shape`, or nullopt when it does not fit in int64.
std::optional<int64_t> CheckedElements(const Shape& shape) {
  int64_t count = 1;
  for (int64_t d : shape.dims()) {
    if (d < 0 || __builtin_mul_overflow(count, d, &count)) return std::nullopt;
  }
  return count;
}

// Why a built layer's sizes cannot be used (empty or too large to count), or "" when fine.
std::string SizeProblem(const Layer& layer) {
  for (int64_t d : layer.output_shape().dims()) {
    if (d < 1) {
      return absl::StrCat("its output ", layer.output_shape().ToString(), " has a dimension < 1");
    }
  }
  if (!CheckedElements(layer.output_shape()).has_value()) {
    return absl::StrCat("its output ", layer.output_shape().ToString(),
                        " has too many elements per sample to count in 64 bits");
  }
  int64_t total = 0;
  for (const ParamSpec& spec : layer.parameter_specs()) {
    const std::optional<int64_t> count = CheckedElements(spec.shape);
    if (!count.has_value() || __builtin_add_overflow(total, *count, &total)) {
      return absl::StrCat("its parameter '", spec.name, "' ", spec.shape.ToString(),
                          " has too many elements to count in 64 bits");
    }
  }
  return "";
}

// "linear, relu, gelu, ..." from the plan's Layer.kind oneof, so new kinds appear by themselves.
std::string LayerKindNames() {
  const auto* oneof = pb::Layer::descriptor()->FindOneofByName("kind");
  std::vector<std::string> names;
  for (int i = 0; i < oneof->field_count(); ++i) names.emplace_back(oneof->field(i)->name());
  return absl::StrJoin(names, ", ");
}

std::string LossKindName(const pb::Loss& loss) {
  const auto* oneof = pb::Loss::descriptor()->FindOneofByName("kind");
  const auto* field = loss.GetReflection()->GetOneofFieldDescriptor(loss, oneof);
  return field == nullptr ? "" : std::string(field->name());
}

// Returns the per-sample input shape, or nullopt after reporting why there is none.
std::optional<Shape> InputShape(const pb::Model& model, PlanErrors& errors) {
  if (!model.has_input()) {
    errors.Add("model.input", "is missing; add input { shape: [784] } (the per-sample shape)");
    return std::nullopt;
  }
  const auto& dims = model.input().shape();
  if (dims.empty()) {
    errors.Add("model.input.shape",
               "is empty; give the per-sample input shape (no batch dimension), e.g. shape: [784]");
    return std::nullopt;
  }
  bool valid = true;
  for (int i = 0; i < dims.size(); ++i) {
    if (dims[i] < 1) {
      errors.Add(absl::StrCat("model.input.shape[", i, "]"),
                 absl::StrCat("is ", dims[i], "; every dimension must be >= 1"));
      valid = false;
    }
  }
  if (!valid) return std::nullopt;
  Shape shape(std::vector<int64_t>(dims.begin(), dims.end()));
  if (!CheckedElements(shape).has_value()) {
    errors.Add("model.input.shape", absl::StrCat(shape.ToString(),
                                                 " has too many elements per sample to count in "
                                                 "64 bits; check the dimensions"));
    return std::nullopt;
  }
  return shape;
}

void CheckLayerNames(const pb::Model& model, PlanErrors& errors) {
  absl::flat_hash_map<std::string, int> first_use;
  for (int i = 0; i < model.layers_size(); ++i) {
    const std::string& name = model.layers(i).name();
    const std::string field = LayerPath(i) + ".name";
    if (name.empty()) {
      errors.Add(field,
                 "is empty; give every layer a unique name (its parameters are called "
                 "<name>.weight, <name>.bias)");
      continue;
    }
    auto [it, inserted] = first_use.emplace(name, i);
    if (!inserted) {
      errors.Add(field, absl::StrCat("'", name, "' is already the name of ", LayerPath(it->second),
                                     " at ", errors.LocationOf(LayerPath(it->second) + ".name"),
                                     "; layer names must be unique"));
    }
  }
}

LayerInfo Describe(const Layer& layer, const std::string& kind) {
  LayerInfo info;
  info.name = layer.name();
  info.kind = kind;
  info.input_shape = layer.input_shape();
  info.output_shape = layer.output_shape();
  for (const ParamSpec& spec : layer.parameter_specs()) {
    info.parameters += spec.shape.num_elements();
    if (spec.product_operand) info.product_parameters += spec.shape.num_elements();
  }
  info.flops_per_sample = 3.0 * layer.ForwardFlopsPerSample();
  info.splits_backward = layer.SplitsBackward();
  for (const ParamSpec& spec : layer.parameter_specs()) {
    info.parameter_names.push_back(absl::StrCat(layer.name(), ".", spec.name));
    info.parameter_specs.push_back(spec);
  }
  for (const ParamSpec& spec : layer.buffer_specs()) {
    info.buffer_names.push_back(absl::StrCat(layer.name(), ".", spec.name));
    info.buffer_specs.push_back(spec);
  }
  return info;
}

// Builds every layer in order; stops at the first that cannot be built.
void InferLayers(const pb::Model& model, const Shape& input, const LayerRegistry& registry,
                 ModelShapes& shapes, PlanErrors& errors) {
  Shape current = input;
  // Only the model input may hold ids (int64); every layer outputs f32.
  DType current_dtype =
      model.input().type() == pb::INT64 ? DType::kI64 : DType::kF32;
  for (int i = 0; i < model.layers_size(); ++i) {
    const pb::Layer& spec = model.layers(i);
    const std::string kind = LayerRegistry::KindOf(spec);
    if (kind.empty()) {
      errors.Add(LayerPath(i),
                 absl::StrCat(LayerLabel(spec), " has no kind; set one of ", LayerKindNames()));
      return;
    }
    const std::string context =
        absl::StrCat(LayerLabel(spec), " (", kind, ", input ", current.ToString(), "): ");
    // A skip join reads an earlier layer's output: its shape is known by now.
    std::optional<Shape> skip_shape;
    if (IsSkipJoin(spec)) {
      const std::string& from = SkipFromOf(spec);
      const std::string field = absl::StrCat(LayerPath(i), ".", kind, ".from");
      int producer = -1;
      for (int j = 0; j < i; ++j) {
        if (model.layers(j).name() == from) producer = j;
      }
      if (from.empty() || producer < 0) {
        bool later = false;
        for (int j = i; j < model.layers_size(); ++j) later |= model.layers(j).name() == from;
        errors.Add(
            field,
            absl::StrCat(context,
                         from.empty() ? "has no `from`; name the earlier layer it joins"
                         : later      ? absl::StrCat("from '", from,
                                                     "' is not an earlier layer; a skip "
                                                          "connection reads an earlier layer's "
                                                          "output")
                                 : absl::StrCat("from '", from, "' names no layer of the model")));
        return;
      }
      skip_shape = shapes.layers[producer].output_shape;
    }
    absl::StatusOr<std::unique_ptr<Layer>> layer =
        registry.Create(spec, current, skip_shape ? &*skip_shape : nullptr);
    if (!layer.ok()) {
      errors.Add(LayerPath(i), absl::StrCat(context, layer.status().message()));
      return;
    }
    if (*layer == nullptr) {
      errors.Add(LayerPath(i), absl::StrCat(context,
                                            "its registered factory returned no layer; "
                                            "fix the factory to return a layer or an "
                                            "error"));
      return;
    }
    if ((*layer)->input_dtype() != current_dtype) {
      errors.Add(LayerPath(i),
                 absl::StrCat(context, "takes ", DTypeName((*layer)->input_dtype()),
                              " input but gets ", DTypeName(current_dtype),
                              current_dtype == DType::kI64
                                  ? "; start a model whose input { type: INT64 } holds token ids "
                                    "with an embedding layer"
                                  : (i == 0 ? "; set model.input { type: INT64 } for token ids"
                                            : "; a layer taking ids must be the model's first")));
      return;
    }
    current_dtype = DType::kF32;
    if (const std::string problem = SizeProblem(**layer); !problem.empty()) {
      errors.Add(LayerPath(i), absl::StrCat(context, problem, "; check its configuration"));
      return;
    }
    shapes.layers.push_back(Describe(**layer, kind));
    current = (*layer)->output_shape();
  }
  shapes.complete = true;
}

void CheckLoss(const pb::Model& model, ModelShapes& shapes, PlanErrors& errors) {
  if (!model.has_loss()) {
    errors.Add("model.loss",
               "is missing; add loss { softmax_cross_entropy {} } or loss { mse {} }");
    return;
  }
  const std::string kind = LossKindName(model.loss());
  if (kind.empty()) {
    errors.Add("model.loss", "has no kind; set softmax_cross_entropy {} or mse {}");
    return;
  }
  if (!shapes.complete || shapes.layers.empty()) return;  // the output shape is unknown
  const LayerInfo& last = shapes.layers.back();
  const Shape& output = last.output_shape;
  if (model.loss().has_softmax_cross_entropy() && (output.rank() < 1 || output.last() < 2)) {
    errors.Add("model.loss",
               absl::StrCat("softmax_cross_entropy needs the model output to be [num_classes] "
                            "or [positions..., num_classes] with num_classes >= 2, but the last "
                            "layer '",
                            last.name, "' outputs ", output.ToString(),
                            "; make the last layer output one score per class"));
    return;
  }
  absl::StatusOr<std::unique_ptr<Loss>> loss = CreateLoss(model.loss());
  if (!loss.ok()) {
    errors.Add("model.loss",
               absl::StrCat("cannot build the ", kind, " loss: ", loss.status().message()));
    return;
  }
  const absl::Status fits = (*loss)->ValidateOutputShape(output);
  if (!fits.ok()) {
    errors.Add("model.loss",
               absl::StrCat(kind, " cannot take the model output ", output.ToString(),
                            " of the last layer '", last.name, "': ", fits.message()));
    return;
  }
  shapes.target_shape = (*loss)->target_shape(output);
  shapes.target_dtype = (*loss)->target_dtype();
  shapes.num_classes = model.loss().has_softmax_cross_entropy() ? output.last() : 0;
}

// Resolves model.ties against the built layers: every name an existing parameter, each tie of
// two or more parameters of one shape, no parameter in two ties.
void ResolveTies(const pb::Model& model, ModelShapes& shapes, PlanErrors& errors) {
  if (model.ties_size() == 0 || !shapes.complete) return;
  absl::flat_hash_map<std::string, TieInfo::Member> by_name;
  for (int l = 0; l < static_cast<int>(shapes.layers.size()); ++l) {
    const LayerInfo& layer = shapes.layers[l];
    for (int p = 0; p < static_cast<int>(layer.parameter_names.size()); ++p) {
      by_name[layer.parameter_names[p]] = {layer.parameter_names[p], l, p};
    }
  }
  absl::flat_hash_map<std::string, int> tied_in;
  for (int t = 0; t < model.ties_size(); ++t) {
    const pb::Tie& tie = model.ties(t);
    const std::string path = absl::StrCat("model.ties[", t, "]");
    if (tie.parameters_size() < 2) {
      errors.Add(path + ".parameters",
                 "needs at least two parameter names, e.g. parameters: [\"embed.weight\", "
                 "\"head.weight\"]");
      continue;
    }
    TieInfo info;
    bool valid = true;
    for (int i = 0; i < tie.parameters_size(); ++i) {
      const std::string field = absl::StrCat(path, ".parameters[", i, "]");
      const std::string& name = tie.parameters(i);
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        errors.Add(field, absl::StrCat("'", name,
                                       "' is not a parameter of the model; names are "
                                       "<layer>.<parameter>, e.g. 'embed.weight'"));
        valid = false;
        continue;
      }
      if (auto [seen, inserted] = tied_in.emplace(name, t); !inserted) {
        errors.Add(field, seen->second == t
                              ? absl::StrCat("'", name, "' appears twice in this tie")
                              : absl::StrCat("'", name, "' is already tied in model.ties[",
                                             seen->second, "]; put all of its partners in one tie"));
        valid = false;
        continue;
      }
      info.members.push_back(it->second);
    }
    if (!valid) continue;
    const auto shape_of = [&shapes](const TieInfo::Member& m) {
      return shapes.layers[m.layer].parameter_specs[m.parameter].shape;
    };
    for (size_t i = 1; i < info.members.size(); ++i) {
      if (shape_of(info.members[i]) != shape_of(info.members[0])) {
        errors.Add(absl::StrCat(path, ".parameters[", i, "]"),
                   absl::StrCat("'", info.members[i].name, "' has shape ",
                                shape_of(info.members[i]).ToString(), " but '",
                                info.members[0].name, "' has ",
                                shape_of(info.members[0]).ToString(),
                                "; tied parameters must have the same shape"));
        valid = false;
      }
    }
    if (valid) shapes.ties.push_back(std::move(info));
  }
}

}  // namespace

ModelShapes InferModelShapes(const pb::Plan& plan, const LayerRegistry& registry,
                             PlanErrors& errors) {
  ModelShapes shapes;
  if (!plan.has_model()) {
    errors.Add("model",
               "is missing; add model { input { shape: [...] } layers { ... } loss { ... "
               "} }");
    return shapes;
  }
  const pb::Model& model = plan.model();
  const std::optional<Shape> input = InputShape(model, errors);
  if (model.layers_size() == 0) {
    errors.Add("model.layers",
               "the model has no layers; add at least one, e.g. layers { name: "
               "\"fc1\" linear { out_features: 10 } }");
  }
  CheckLayerNames(model, errors);
  if (input.has_value() && model.layers_size() > 0) {
    InferLayers(model, *input, registry, shapes, errors);
  }
  CheckLoss(model, shapes, errors);
  ResolveTies(model, shapes, errors);
  return shapes;
}

}  // namespace gpipe
