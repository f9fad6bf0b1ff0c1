#include "runtime/estimate/layer_profiler.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "layers/parameter_init.h"
#include "layers/skip_edges.h"
#include "runtime/core/json.h"
#include "runtime/core/rng.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_loader.h"

namespace gpipe {
namespace {

// Key words of the profiler's random streams ("prof" in ASCII), then what the stream fills.
constexpr uint64_t kProfileStreamTag = 0x666F7270ull;
constexpr uint64_t kInputStream = 1;
constexpr uint64_t kOutputGradStream = 2;

// Test inputs are made on the host and copied to the device, so the profiler runs on any
// backend.
absl::StatusOr<Tensor> UniformTensor(Device& device, const Shape& shape, uint64_t seed,
                                     uint64_t stream_key, MemoryKind kind) {
  ASSIGN_OR_RETURN(Tensor tensor, Tensor::Empty(device, shape, DType::kF32, kind));
  RandomStream stream(seed, {kProfileStreamTag, stream_key});
  std::vector<float> values(tensor.num_elements());
  for (float& v : values) v = 2.0f * stream.NextUniform() - 1.0f;
  RETURN_IF_ERROR(device.CopyFromHost(values.data(), tensor.bytes(), tensor));
  return tensor;
}

// `tensor` converted to `dtype` (the device's cast op), as test data.
absl::StatusOr<Tensor> Converted(Device& device, const Tensor& tensor, DType dtype) {
  ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(device, tensor.shape(), dtype, MemoryKind::kData));
  RETURN_IF_ERROR(device.ops().tensor.Cast(tensor, out));
  return out;
}

absl::StatusOr<Tensor> RandomIds(Device& device, const Shape& shape, int64_t limit, uint64_t seed) {
  ASSIGN_OR_RETURN(Tensor tensor, Tensor::Empty(device, shape, DType::kI64, MemoryKind::kData));
  RandomStream stream(seed, {kProfileStreamTag, kInputStream});
  std::vector<int64_t> ids(tensor.num_elements());
  for (int64_t& id : ids) id = stream.NextU32() % limit;
  RETURN_IF_ERROR(device.CopyFromHost(ids.data(), tensor.bytes(), tensor));
  return tensor;
}

// Tensors shaped and initialized as `specs` say (parameters or buffers), keyed like training's.
absl::StatusOr<std::vector<Tensor>> InitializedTensors(Device& device,
                                                       const std::vector<ParamSpec>& specs,
                                                       uint64_t seed, int layer_index,
                                                       int first_index, MemoryKind kind) {
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < specs.size(); ++i) {
    ASSIGN_OR_RETURN(Tensor tensor, Tensor::Empty(device, specs[i].shape, DType::kF32, kind));
    RETURN_IF_ERROR(InitializeParameter(device, specs[i], seed, layer_index,
                                        first_index + static_cast<int>(i), tensor));
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

// Median in microseconds of `repeats` timed calls of `call`, after `warmup` untimed ones. Each
// timed call ends when the device has finished its work (a GPU runs it asynchronously).
absl::StatusOr<double> MedianMicros(Device& device, const ProfileOptions& options,
                                    const std::function<absl::Status()>& call) {
  for (int i = 0; i < options.warmup; ++i) RETURN_IF_ERROR(call());
  RETURN_IF_ERROR(device.Synchronize());
  std::vector<double> micros;
  for (int i = 0; i < options.repeats; ++i) {
    const double start = NowMicros(options.clock);
    RETURN_IF_ERROR(call());
    RETURN_IF_ERROR(device.Synchronize());
    micros.push_back(NowMicros(options.clock) - start);
  }
  std::sort(micros.begin(), micros.end());
  const size_t mid = micros.size() / 2;
  return micros.size() % 2 == 1 ? micros[mid] : 0.5 * (micros[mid - 1] + micros[mid]);
}

// Microseconds rounded to whole nanoseconds: clocks resolve no finer, and the JSON stays short.
double ToNanosecond(double micros) { return std::round(micros * 1e3) / 1e3; }

absl::Status InLayer(const absl::Status& status, int layer_index, const std::string& name) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat("profiling layer ", layer_index, " '", name,
                                                  "': ", status.message()));
}

}  // namespace

double NowMicros(ProfileClock clock) {
  if (clock == ProfileClock::kWall) {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) * 1e-3;
}

absl::StatusOr<LayerTiming> ProfileLayer(const Layer& layer, Device& device, int64_t batch,
                                         int layer_index, bool need_input_grad,
                                         const ProfileOptions& options) {
  if (options.repeats < 1 || options.warmup < 0 || batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("profiling needs repeats >= 1, warmup >= 0 and a batch >= 1, got repeats ",
                     options.repeats, ", warmup ", options.warmup, ", batch ", batch));
  }
  const std::vector<ParamSpec> param_specs = layer.parameter_specs();
  ASSIGN_OR_RETURN(std::vector<Tensor> params,
                   InitializedTensors(device, param_specs, options.seed, layer_index, 0,
                                      MemoryKind::kParameter));
  ASSIGN_OR_RETURN(std::vector<Tensor> buffers,
                   InitializedTensors(device, layer.buffer_specs(), options.seed, layer_index,
                                      static_cast<int>(param_specs.size()), MemoryKind::kData));
  std::vector<Tensor> grads;
  for (const ParamSpec& spec : param_specs) {
    ASSIGN_OR_RETURN(Tensor grad,
                     Tensor::Empty(device, spec.shape, DType::kF32, MemoryKind::kGradient));
    RETURN_IF_ERROR(device.ops().tensor.Fill(grad, 0.0));
    grads.push_back(std::move(grad));
  }

  const Shape input_shape = layer.input_shape().WithBatch(batch);
  Tensor x;
  if (layer.input_dtype() == DType::kI64) {
    if (param_specs.empty() || param_specs[0].shape.rank() < 1) {
      return absl::UnimplementedError(
          "the layer reads int64 ids but has no table parameter to bound them by");
    }
    ASSIGN_OR_RETURN(x, RandomIds(device, input_shape, param_specs[0].shape.dim(0), options.seed));
  } else {
    ASSIGN_OR_RETURN(
        x, UniformTensor(device, input_shape, options.seed, kInputStream, MemoryKind::kData));
  }
  ASSIGN_OR_RETURN(Tensor dy, UniformTensor(device, layer.output_shape().WithBatch(batch),
                                            options.seed, kOutputGradStream, MemoryKind::kData));
  // A layer that produces another float dtype (bf16 under mixed precision) is timed on inputs
  // and output gradients of that dtype, as the previous and next such layer hand them over.
  if (layer.output_dtype() != DType::kF32) {
    if (x.dtype() == DType::kF32) {
      ASSIGN_OR_RETURN(x, Converted(device, x, layer.output_dtype()));
    }
    ASSIGN_OR_RETURN(dy, Converted(device, dy, layer.output_dtype()));
  }

  const LayerContext ctx{.device = device,
                         .training = true,
                         .seed = options.seed,
                         .layer_index = layer_index,
                         .need_input_grad = need_input_grad,
                         .buffers = buffers};
  LayerTiming timing{.name = layer.name(), .splits = layer.SplitsBackward()};
  if (const SkipJoin* join = layer.skip_join()) {
    // A skip join: its second input is an output of the join's own shape and dtype kind.
    ASSIGN_OR_RETURN(Tensor skip, UniformTensor(device, join->skip_shape().WithBatch(batch),
                                                options.seed, kInputStream, MemoryKind::kData));
    if (layer.output_dtype() != DType::kF32) {
      ASSIGN_OR_RETURN(skip, Converted(device, skip, layer.output_dtype()));
    }
    ASSIGN_OR_RETURN(timing.forward_us, MedianMicros(device, options, [&]() -> absl::Status {
                       SavedTensors saved;
                       return join->ForwardJoin(ctx, x, skip, saved).status();
                     }));
    SavedTensors saved;
    RETURN_IF_ERROR(join->ForwardJoin(ctx, x, skip, saved).status());
    ASSIGN_OR_RETURN(timing.backward_us, MedianMicros(device, options, [&]() -> absl::Status {
                       return join->BackwardJoin(ctx, saved, dy).status();
                     }));
    timing.backward_input_us = timing.backward_us;
    return timing;
  }
  ASSIGN_OR_RETURN(timing.forward_us, MedianMicros(device, options, [&]() -> absl::Status {
                     SavedTensors saved;
                     return layer.Forward(ctx, params, x, saved).status();
                   }));
  // Backward only reads what Forward saved, so one Forward serves every backward call.
  SavedTensors saved;
  RETURN_IF_ERROR(layer.Forward(ctx, params, x, saved).status());
  ASSIGN_OR_RETURN(timing.backward_us, MedianMicros(device, options, [&]() -> absl::Status {
                     return layer.Backward(ctx, params, grads, saved, dy).status();
                   }));
  if (const SplitBackward* halves = layer.split_backward(); halves != nullptr) {
    ASSIGN_OR_RETURN(timing.backward_input_us, MedianMicros(device, options, [&]() -> absl::Status {
                       return halves->BackwardInput(ctx, params, saved, dy).status();
                     }));
    ASSIGN_OR_RETURN(timing.backward_weight_us,
                     MedianMicros(device, options, [&]() -> absl::Status {
                       return halves->BackwardWeight(ctx, grads, saved, dy);
                     }));
  } else {
    timing.backward_input_us = timing.backward_us;
  }
  return timing;
}

absl::StatusOr<std::string> ProfileAnalyzedPlanLayers(const AnalyzedPlan& analyzed,
                                                      const LayerRegistry& registry, Device& device,
                                                      const ProfileOptions& options) {
  const pb::Plan& plan = analyzed.plan;
  const int64_t micro_batches = plan.pipeline().micro_batches();
  if (micro_batches < 1 || plan.training().global_batch() % micro_batches != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.global_batch (", plan.training().global_batch(),
        ") must be a multiple of pipeline.micro_batches (", micro_batches, ") to profile"));
  }
  const int64_t micro_batch = MicroBatchSize(plan);
  ASSIGN_OR_RETURN(const std::vector<SkipEdge> edges, FindSkipEdges(plan.model()));
  std::string layers_json;
  for (int i = 0; i < plan.model().layers_size(); ++i) {
    const pb::Layer& spec = plan.model().layers(i);
    const Shape* skip_shape = nullptr;
    for (const SkipEdge& edge : edges) {
      if (edge.join == i) skip_shape = &analyzed.layers[edge.producer].output_shape;
    }
    absl::StatusOr<std::unique_ptr<Layer>> layer =
        registry.Create(spec, analyzed.layers[i].input_shape, skip_shape);
    RETURN_IF_ERROR(InLayer(layer.status(), i, spec.name()));
    absl::StatusOr<LayerTiming> timing =
        ProfileLayer(**layer, device, micro_batch, i, /*need_input_grad=*/i > 0, options);
    RETURN_IF_ERROR(InLayer(timing.status(), i, spec.name()));
    const Json entry = {{"name", timing->name},
                        {"forward_us", ToNanosecond(timing->forward_us)},
                        {"backward_input_us", ToNanosecond(timing->backward_input_us)},
                        {"backward_weight_us", ToNanosecond(timing->backward_weight_us)}};
    // One layer per line keeps the profile readable and diffable.
    absl::StrAppend(&layers_json, i == 0 ? "\n    " : ",\n    ", DumpJson(entry));
  }
  return absl::StrCat("{\"device\": ", JsonQuote(device.name()), ", \"threads\": ", options.threads,
                      ", \"micro_batch\": ", micro_batch, ", \"repeats\": ", options.repeats,
                      ",\n  \"layers\": [", layers_json, "\n  ]\n}\n");
}

absl::StatusOr<std::string> ProfilePlanLayers(const pb::Plan& plan, const LayerRegistry& registry,
                                              Device& device, const ProfileOptions& options) {
  LoadedPlan loaded{.plan = plan, .path = "<profiled plan>", .directory = "."};
  // Layers are timed one by one: the partition does not matter, and a PROFILE balance would need
  // the costs being measured here.
  if (loaded.plan.pipeline().balance() == pb::PROFILE) {
    loaded.plan.mutable_pipeline()->set_balance(pb::PARAMETERS);
  }
  ASSIGN_OR_RETURN(AnalyzedPlan analyzed, AnalyzePlan(loaded, registry));
  return ProfileAnalyzedPlanLayers(analyzed, registry, device, options);
}

}  // namespace gpipe
