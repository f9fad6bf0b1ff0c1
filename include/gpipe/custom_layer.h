// gpipe/custom_layer.h — layers a program adds to gpipe's own.
//
// Contract: a custom layer is a gpipe::Layer (layers/layer.h: a pure function of its parameters
// with Forward, Backward, its parameter specs, FLOPs and what it saves for backward) built by a
// factory the program registers under a type name; plans use it as
//   layers { name: "act" custom { type: "scaled_tanh" numbers { key: "scale" value: 2 } } }.
// Kernels are per backend: every custom type has a CPU factory (host memory; tensors' f32()
// pointers are readable and writable), and may have a CUDA factory (device memory on the
// stage's GPU; launch on the stream gpipe::CudaStreamOf(ctx.device) from gpipe/cuda.h, target
// gpipe::backend_cuda) and a SIM factory (the simulated device holds no values: a layer built
// from Device ops works there). A layer written only with the device's ops (ctx.device.ops())
// runs everywhere: give the same factory for every device. A plan whose runtime.device has no
// factory for a custom type is refused at start-up naming the layer.
//
// Factories run on rank 0 while the plan is checked (every layer is built once to infer shapes)
// and on each rank holding the layer; they must be deterministic and thread-compatible, and fail
// with INVALID_ARGUMENT naming the problem (gpipe adds the layer's name and plan location).
// Pipelined training equals single-device training for custom layers as for built-in ones when
// Forward and Backward are deterministic.
#ifndef GPIPE_CUSTOM_LAYER_H_
#define GPIPE_CUSTOM_LAYER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "layers/layer.h"
#include "proto/plan.pb.h"
#include "runtime/core/shape.h"

namespace gpipe {

// What a factory gets: the plan entry's name and settings, and the per-sample input shape.
class LayerArgs {
 public:
  LayerArgs(const pb::Layer& spec, const Shape& input_shape)
      : spec_(spec), input_shape_(input_shape) {}

  const std::string& name() const { return spec_.name(); }
  const Shape& input_shape() const { return input_shape_; }
  // custom.numbers[key]; INVALID_ARGUMENT naming the key when it is absent.
  absl::StatusOr<double> Number(const std::string& key) const;
  double NumberOr(const std::string& key, double fallback) const;
  // custom.strings[key]; INVALID_ARGUMENT naming the key when it is absent.
  absl::StatusOr<std::string> String(const std::string& key) const;
  std::string StringOr(const std::string& key, const std::string& fallback) const;
  const pb::CustomLayer& settings() const { return spec_.custom(); }

 private:
  const pb::Layer& spec_;
  const Shape& input_shape_;
};

using CustomLayerFactory =
    std::function<absl::StatusOr<std::unique_ptr<Layer>>(const LayerArgs& args)>;

struct CustomLayerType {
  std::string type;         // the plan's custom.type
  CustomLayerFactory cpu;   // required
  CustomLayerFactory cuda;  // optional: runtime.device CUDA
  CustomLayerFactory sim;   // optional: runtime.device SIM
};

}  // namespace gpipe

#endif  // GPIPE_CUSTOM_LAYER_H_
