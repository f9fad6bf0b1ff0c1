// Composites under bf16 storage (training.precision BF16) and the bf16 tensors they hand their
// inner layers (LayerSequence).
// - An inner linear or attention gets its input as the bf16 tensor the composite keeps of it
//   (Layer::TakesBf16Inputs): rounded once in the forward, read as it is in the backward, never
//   widened to an f32 copy. Checked on the residual MLP and the transformer block, each against
//   the same composite whose layers refuse bf16 (so they compute on f32 copies, as before): the
//   same output, input gradient and parameter gradients bit for bit, the same saved bytes, and
//   the layers did get bf16 tensors.
// - An element-wise activation between linears passes bf16 through (Layer::KeepsBf16): it
//   computes on its rounded input and hands on its rounded output, and in the backward gets its
//   output gradient rounded and hands the linear before it a bf16 input gradient. That changes
//   the arithmetic, so it is checked against a reference computed from the leaf layers in f32
//   with the roundings written out: the same bits.
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "layers/bf16_tensors.h"
#include "layers/causal_self_attention.h"
#include "layers/gelu.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/registry.h"
#include "layers/residual.h"
#include "layers/transformer_block.h"
#include "runtime/core/check.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/exec/bf16_layer.h"
#include "runtime/exec/bf16_loss.h"
#include "runtime/exec/parameter_store.h"
#include "runtime/exec/stage_model.h"
#include "tests/layers/pass_through_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe {
namespace {

// What the probed layers were given, in call order: "<type> <dtype>" of every Forward input, of
// every Backward's first saved tensor and of every Backward's output gradient.
struct Seen {
  std::vector<std::string> forward_inputs;
  std::vector<std::string> backward_inputs;
  std::vector<std::string> output_grads;
};

std::string Entry(const Layer& layer, const Tensor& tensor) {
  return std::string(layer.type()) + (tensor.dtype() == DType::kBF16 ? " bf16" : " f32");
}

// A layer that takes bf16 as it says it does (`takes_bf16`), or refuses it (computing on f32
// copies), and records what it got.
class ProbedLayer final : public testing::PassThroughLayer {
 public:
  ProbedLayer(std::unique_ptr<Layer> inner, bool takes_bf16, Seen* seen)
      : PassThroughLayer(std::move(inner)), takes_bf16_(takes_bf16), seen_(seen) {}
  bool TakesBf16Inputs() const override { return takes_bf16_ && inner().TakesBf16Inputs(); }
  bool TakesBf16Saved() const override { return takes_bf16_ && inner().TakesBf16Saved(); }
  bool TakesBf16OutputGrads() const override {
    return takes_bf16_ && inner().TakesBf16OutputGrads();
  }
  bool KeepsBf16() const override { return takes_bf16_ && inner().KeepsBf16(); }
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override {
    seen_->forward_inputs.push_back(Entry(inner(), x));
    return inner().Forward(ctx, params, x, saved);
  }
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override {
    seen_->backward_inputs.push_back(Entry(inner(), saved.tensors.at(0)));
    seen_->output_grads.push_back(Entry(inner(), dy));
    return inner().Backward(ctx, params, grads, saved, dy);
  }

 private:
  bool takes_bf16_;
  Seen* seen_;
};

// The layers these composites are built of, with every linear and attention probed and taking
// bf16 as `takes_bf16` says, and the gelu probed and passing bf16 through as `gelu_keeps_bf16`
// says.
LayerRegistry ProbedRegistry(bool takes_bf16, bool gelu_keeps_bf16, Seen* seen) {
  LayerRegistry registry;
  const auto probed = [seen](LeafLayerFactory create, bool takes_bf16) -> LeafLayerFactory {
    return [create, takes_bf16, seen](
               const pb::Layer& spec,
               const Shape& input_shape) -> absl::StatusOr<std::unique_ptr<Layer>> {
      ASSIGN_OR_RETURN(std::unique_ptr<Layer> layer, create(spec, input_shape));
      return std::unique_ptr<Layer>(
          std::make_unique<ProbedLayer>(std::move(layer), takes_bf16, seen));
    };
  };
  GPIPE_CHECK(registry.Register("linear", probed(&Linear::Create, takes_bf16)).ok());
  GPIPE_CHECK(
      registry.Register("causal_self_attention", probed(&CausalSelfAttention::Create, takes_bf16))
          .ok());
  GPIPE_CHECK(registry.Register("gelu", probed(&Gelu::Create, gelu_keeps_bf16)).ok());
  GPIPE_CHECK(registry.Register("layer_norm", LeafLayerFactory(&LayerNorm::Create)).ok());
  GPIPE_CHECK(registry.Register("residual", LayerFactory(&Residual::Create)).ok());
  GPIPE_CHECK(registry.Register("transformer_block", LayerFactory(&TransformerBlock::Create)).ok());
  return registry;
}

constexpr char kResidualMlp[] = R"pb(
  input { shape: [ 6, 8 ] }
  layers {
    name: "mlp"
    residual {
      layers {
        name: "up"
        linear { out_features: 16 }
      }
      layers {
        name: "act"
        gelu {}
      }
      layers {
        name: "down"
        linear { out_features: 8 }
      }
    }
  }
  loss { mse {} }
)pb";

// The gelu's output goes to a layer norm (which reads f32): no bf16 through the gelu either way.
constexpr char kNormAfterGelu[] = R"pb(
  input { shape: [ 6, 8 ] }
  layers {
    name: "mlp"
    residual {
      layers {
        name: "up"
        linear { out_features: 16 }
      }
      layers {
        name: "act"
        gelu {}
      }
      layers {
        name: "norm"
        layer_norm {}
      }
      layers {
        name: "down"
        linear { out_features: 8 }
      }
    }
  }
  loss { mse {} }
)pb";

constexpr char kTransformerBlock[] = R"pb(
  input { shape: [ 6, 8 ] }
  layers {
    name: "block"
    transformer_block { num_heads: 2 }
  }
  loss { mse {} }
)pb";

std::vector<uint8_t> Bytes(const Tensor& tensor) {
  const auto* data = static_cast<const uint8_t*>(tensor.raw_data());
  return std::vector<uint8_t>(data, data + tensor.bytes());
}

struct Bf16Run {
  std::vector<uint8_t> y, dx;
  std::vector<std::vector<uint8_t>> grads;
  int64_t saved_bytes = 0;
  Seen seen;
  // The parameters the layer ran with (the stored values; weights as their bf16 product copies).
  std::vector<std::vector<uint8_t>> operands;
  std::vector<DType> operand_dtypes;
};

// The model's input and output gradient, as the neighbouring stages hand them: bf16.
Tensor Input(Device& device) {
  auto x = NarrowedToBf16(device, testing::UniformTensor(device, Shape{2, 6, 8}, 11, -2.0f, 2.0f),
                          MemoryKind::kActivation);
  GPIPE_CHECK(x.ok()) << x.status();
  return *x;
}

Tensor OutputGrad(Device& device) {
  auto dy = NarrowedToBf16(device, testing::UniformTensor(device, Shape{2, 6, 8}, 23, -2.0f, 2.0f),
                           MemoryKind::kActivation);
  GPIPE_CHECK(dy.ok()) << dy.status();
  return *dy;
}

// One forward and backward of the plan's single layer in bf16 mixed precision (Bf16Layer, as
// StageChunks makes it), its parameters initialized from seed 7.
Bf16Run RunBf16(const char* plan, bool layers_take_bf16, bool gelu_keeps_bf16) {
  Bf16Run run;
  const LayerRegistry registry = ProbedRegistry(layers_take_bf16, gelu_keeps_bf16, &run.seen);
  pb::Model proto;
  GPIPE_CHECK(google::protobuf::TextFormat::ParseFromString(plan, &proto));
  auto model = StageModel::Create(proto, 0, proto.layers_size(), Shape{6, 8}, registry);
  GPIPE_CHECK(model.ok()) << model.status();
  model->Decorate(
      [](std::unique_ptr<Layer> layer, int) -> std::unique_ptr<Layer> {
        return std::make_unique<Bf16Layer>(std::move(layer));
      },
      [](std::unique_ptr<Loss> loss) -> std::unique_ptr<Loss> {
        return std::make_unique<Bf16Loss>(std::move(loss));
      });
  CpuDevice device;
  auto store = ParameterStore::Create(device, *model, 7, {}, /*bf16_product_copies=*/true);
  GPIPE_CHECK(store.ok()) << store.status();
  GPIPE_CHECK(store->ZeroGrads().ok());
  const Layer& layer = model->layer(0);
  auto operands = store->ProductOperandsOf(0);
  GPIPE_CHECK(operands.ok()) << operands.status();
  const LayerContext ctx{.device = device, .seed = 5, .layer_index = 0};
  SavedTensors saved;
  auto y = layer.Forward(ctx, *operands, Input(device), saved);
  GPIPE_CHECK(y.ok()) << y.status();
  for (const Tensor& t : saved.tensors) run.saved_bytes += t.defined() ? t.bytes() : 0;
  auto dx = layer.Backward(ctx, *operands, store->grads_of(0), saved, OutputGrad(device));
  GPIPE_CHECK(dx.ok()) << dx.status();
  run.y = Bytes(*y);
  run.dx = Bytes(*dx);
  for (const Tensor& g : store->grads_of(0)) run.grads.push_back(Bytes(g));
  for (const Tensor& p : *operands) {
    run.operands.push_back(Bytes(p));
    run.operand_dtypes.push_back(p.dtype());
  }
  return run;
}

TEST(Bf16SequenceInputsTest, InnerLayersTakeTheKeptBf16TensorAndComputeTheSameBits) {
  struct Case {
    const char* plan;
    // What the layers taking bf16 inputs get. In the residual MLP's forward the first linear reads
    // the residual's own input (the caller's f32 copy; in the backward the bf16 tensor the caller
    // keeps of it); every other one reads an inner output (the layer norms', the gelu's). The
    // backward visits them last first.
    std::vector<std::string> forward, backward;
  };
  for (const Case& c : {
           Case{kResidualMlp,
                {"linear f32", "gelu f32", "linear bf16"},
                {"linear bf16", "gelu f32", "linear bf16"}},
           Case{kTransformerBlock,
                {"causal_self_attention bf16", "linear bf16", "gelu f32", "linear bf16"},
                {"linear bf16", "gelu f32", "linear bf16", "causal_self_attention bf16"}},
       }) {
    SCOPED_TRACE(c.plan);
    // The gelu keeps f32 in both (its bf16 pass-through changes the arithmetic: tested below).
    const Bf16Run taking = RunBf16(c.plan, /*layers_take_bf16=*/true, /*gelu_keeps_bf16=*/false);
    const Bf16Run widened = RunBf16(c.plan, /*layers_take_bf16=*/false, /*gelu_keeps_bf16=*/false);
    EXPECT_EQ(taking.seen.forward_inputs, c.forward);
    EXPECT_EQ(taking.seen.backward_inputs, c.backward);
    for (const std::string& entry : widened.seen.forward_inputs) {
      EXPECT_TRUE(entry.ends_with(" f32")) << entry;
    }
    for (const std::string& entry : widened.seen.backward_inputs) {
      EXPECT_TRUE(entry.ends_with(" f32")) << entry;
    }
    // Without an activation passing bf16 on, every inner output gradient stays f32.
    for (const std::string& entry : taking.seen.output_grads) {
      EXPECT_TRUE(entry.ends_with(" f32")) << entry;
    }
    EXPECT_FALSE(taking.y.empty());
    EXPECT_EQ(taking.y, widened.y);
    EXPECT_EQ(taking.dx, widened.dx);
    EXPECT_EQ(taking.grads, widened.grads);
    EXPECT_EQ(taking.saved_bytes, widened.saved_bytes);
  }
}

// The residual MLP's arithmetic with the roundings written out, from its leaf layers in f32
// (products at bf16 as in mixed precision; nothing kept as bf16 inside): what the composite
// computes when the gelu passes bf16 through.
struct Reference {
  std::vector<uint8_t> y, dx;
  std::vector<std::vector<uint8_t>> grads;
};

Reference ResidualMlpByHand(const Bf16Run& run) {
  CpuDevice device;
  const LayerContext ctx{
      .device = device, .seed = 5, .layer_index = 0, .product_precision = ProductPrecision::kBF16};
  // f32 values rounded to bf16 (an f32 tensor of bf16 values).
  const auto round = [&](const Tensor& t) {
    auto narrow = NarrowedToBf16(device, t, MemoryKind::kActivation);
    GPIPE_CHECK(narrow.ok()) << narrow.status();
    auto wide = WidenedFromBf16(device, *narrow, MemoryKind::kActivation);
    GPIPE_CHECK(wide.ok()) << wide.status();
    return *wide;
  };
  const auto widen = [&](const Tensor& t) {
    auto wide = WidenedFromBf16(device, t, MemoryKind::kActivation);
    GPIPE_CHECK(wide.ok()) << wide.status();
    return *wide;
  };
  const auto add = [&](const Tensor& a, const Tensor& b) {
    auto sum = Tensor::Empty(device, a.shape(), DType::kF32, MemoryKind::kActivation);
    GPIPE_CHECK(sum.ok());
    GPIPE_CHECK(device.ops().tensor.Add(a, b, *sum).ok());
    return *sum;
  };
  pb::Layer up_spec, down_spec, gelu_spec;
  up_spec.mutable_linear()->set_out_features(16);
  down_spec.mutable_linear()->set_out_features(8);
  gelu_spec.mutable_gelu();
  auto up = Linear::Create(up_spec, Shape{6, 8});
  auto gelu = Gelu::Create(gelu_spec, Shape{6, 16});
  auto down = Linear::Create(down_spec, Shape{6, 16});
  GPIPE_CHECK(up.ok() && gelu.ok() && down.ok());
  // The composite's parameters, [up.weight, up.bias, down.weight, down.bias], as it ran with them.
  std::vector<Tensor> params;
  std::vector<Tensor> grads;
  const std::vector<ParamSpec> specs = {(*up)->parameter_specs()[0], (*up)->parameter_specs()[1],
                                        (*down)->parameter_specs()[0],
                                        (*down)->parameter_specs()[1]};
  GPIPE_CHECK(run.operands.size() == specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::vector<uint8_t>& bytes = run.operands[i];
    auto param =
        Tensor::Empty(device, specs[i].shape, run.operand_dtypes[i], MemoryKind::kParameter);
    GPIPE_CHECK(param.ok() && param->bytes() == static_cast<int64_t>(bytes.size()));
    std::memcpy(param->raw_data(), bytes.data(), bytes.size());
    params.push_back(*param);
    auto grad = Tensor::Empty(device, specs[i].shape, DType::kF32, MemoryKind::kGradient);
    GPIPE_CHECK(grad.ok() && device.ops().tensor.Fill(*grad, 0.0).ok());
    grads.push_back(*grad);
  }
  const std::span<const Tensor> up_params(params.data(), 2), down_params(params.data() + 2, 2);
  const std::span<Tensor> up_grads(grads.data(), 2), down_grads(grads.data() + 2, 2);

  const Tensor x = widen(Input(device));
  SavedTensors up_saved, gelu_saved, down_saved;
  auto h = (*up)->Forward(ctx, up_params, x, up_saved);
  GPIPE_CHECK(h.ok()) << h.status();
  auto g = (*gelu)->Forward(ctx, {}, round(*h), gelu_saved);  // gelu reads its input rounded
  GPIPE_CHECK(g.ok()) << g.status();
  auto f = (*down)->Forward(ctx, down_params, round(*g), down_saved);
  GPIPE_CHECK(f.ok()) << f.status();
  auto y = NarrowedToBf16(device, add(x, *f), MemoryKind::kActivation);  // Bf16Layer's output
  GPIPE_CHECK(y.ok());

  const Tensor dy = widen(OutputGrad(device));
  auto dg = (*down)->Backward(ctx, down_params, down_grads, down_saved, dy);
  GPIPE_CHECK(dg.ok()) << dg.status();
  auto dh = (*gelu)->Backward(ctx, {}, {}, gelu_saved, round(*dg));  // its output gradient rounded
  GPIPE_CHECK(dh.ok()) << dh.status();
  auto dx_f = (*up)->Backward(ctx, up_params, up_grads, up_saved, round(*dh));  // and its dx
  GPIPE_CHECK(dx_f.ok()) << dx_f.status();
  auto dx = NarrowedToBf16(device, add(*dx_f, dy), MemoryKind::kActivation);
  GPIPE_CHECK(dx.ok());
  Reference reference{.y = Bytes(*y), .dx = Bytes(*dx)};
  for (const Tensor& grad : grads) reference.grads.push_back(Bytes(grad));
  return reference;
}

TEST(Bf16SequenceInputsTest, AnActivationBetweenLinearsPassesBf16AndRoundsWhereItSays) {
  const Bf16Run run = RunBf16(kResidualMlp, /*layers_take_bf16=*/true, /*gelu_keeps_bf16=*/true);
  // The gelu computes on its rounded input and hands on bf16; in the backward it gets its output
  // gradient rounded and the first linear gets its bf16 input gradient.
  EXPECT_EQ(run.seen.forward_inputs,
            (std::vector<std::string>{"linear f32", "gelu bf16", "linear bf16"}));
  EXPECT_EQ(run.seen.output_grads,
            (std::vector<std::string>{"linear f32", "gelu bf16", "linear bf16"}));
  const Reference reference = ResidualMlpByHand(run);
  EXPECT_FALSE(run.y.empty());
  EXPECT_EQ(run.y, reference.y);
  EXPECT_EQ(run.dx, reference.dx);
  EXPECT_EQ(run.grads, reference.grads);
  // Against the f32 pass (the gelu refusing bf16) it is a different rounding, not the same bits.
  const Bf16Run f32_gelu = RunBf16(kResidualMlp, true, /*gelu_keeps_bf16=*/false);
  EXPECT_NE(run.grads, f32_gelu.grads);
  EXPECT_EQ(run.saved_bytes, f32_gelu.saved_bytes);

  // In the transformer block, the same between its MLP's linears; attention's and the norms'
  // gradients stay f32.
  const Bf16Run block =
      RunBf16(kTransformerBlock, /*layers_take_bf16=*/true, /*gelu_keeps_bf16=*/true);
  EXPECT_EQ(block.seen.forward_inputs,
            (std::vector<std::string>{"causal_self_attention bf16", "linear bf16", "gelu bf16",
                                      "linear bf16"}));
  EXPECT_EQ(block.seen.output_grads,
            (std::vector<std::string>{"linear f32", "gelu bf16", "linear bf16",
                                      "causal_self_attention f32"}));

  // Where the next layer reads f32, the gelu passes bf16 neither way: the same bits as a gelu
  // that refuses bf16.
  const Bf16Run norm = RunBf16(kNormAfterGelu, /*layers_take_bf16=*/true, /*gelu_keeps_bf16=*/true);
  EXPECT_EQ(norm.seen.forward_inputs,
            (std::vector<std::string>{"linear f32", "gelu f32", "linear bf16"}));
  EXPECT_EQ(norm.seen.output_grads,
            (std::vector<std::string>{"linear f32", "gelu f32", "linear f32"}));
  const Bf16Run norm_f32 = RunBf16(kNormAfterGelu, true, /*gelu_keeps_bf16=*/false);
  EXPECT_EQ(norm.y, norm_f32.y);
  EXPECT_EQ(norm.dx, norm_f32.dx);
  EXPECT_EQ(norm.grads, norm_f32.grads);
}

}  // namespace
}  // namespace gpipe
