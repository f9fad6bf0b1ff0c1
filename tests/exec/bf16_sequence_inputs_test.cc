// Composites under bf16 storage (training.precision BF16) hand an inner linear or attention its
// input as the bf16 tensor they keep of it (LayerSequence, Layer::TakesBf16Inputs): rounded once
// in the forward, read as it is in the backward, never widened to an f32 copy. Checked on the
// residual MLP and the transformer block, each against the same composite whose layers refuse
// bf16 inputs (so they compute on f32 copies, as before): the same output, input gradient and
// parameter gradients bit for bit, the same saved bytes, and the layers did get bf16 tensors.
#include <cstdint>
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

// What the probed layers were given, in call order: "<type> <dtype>" of every Forward input and
// of every Backward's saved input.
struct Seen {
  std::vector<std::string> forward_inputs;
  std::vector<std::string> backward_inputs;
};

std::string Entry(const Layer& layer, const Tensor& tensor) {
  return std::string(layer.type()) + (tensor.dtype() == DType::kBF16 ? " bf16" : " f32");
}

// A linear or attention that says whether it takes bf16 inputs as its test case wants, and
// records what it got.
class ProbedLayer final : public testing::PassThroughLayer {
 public:
  ProbedLayer(std::unique_ptr<Layer> inner, bool takes_bf16, Seen* seen)
      : PassThroughLayer(std::move(inner)), takes_bf16_(takes_bf16), seen_(seen) {}
  bool TakesBf16Inputs() const override { return takes_bf16_; }
  bool TakesBf16Saved() const override { return takes_bf16_; }
  absl::StatusOr<Tensor> Forward(const LayerContext& ctx, std::span<const Tensor> params,
                                 const Tensor& x, SavedTensors& saved) const override {
    seen_->forward_inputs.push_back(Entry(inner(), x));
    return inner().Forward(ctx, params, x, saved);
  }
  absl::StatusOr<Tensor> Backward(const LayerContext& ctx, std::span<const Tensor> params,
                                  std::span<Tensor> grads, const SavedTensors& saved,
                                  const Tensor& dy) const override {
    seen_->backward_inputs.push_back(Entry(inner(), saved.tensors.at(0)));
    return inner().Backward(ctx, params, grads, saved, dy);
  }

 private:
  bool takes_bf16_;
  Seen* seen_;
};

// The layers these composites are built of, with every linear and attention probed.
LayerRegistry ProbedRegistry(bool takes_bf16, Seen* seen) {
  LayerRegistry registry;
  const auto probed = [takes_bf16, seen](LeafLayerFactory create) -> LeafLayerFactory {
    return [create, takes_bf16, seen](
               const pb::Layer& spec,
               const Shape& input_shape) -> absl::StatusOr<std::unique_ptr<Layer>> {
      ASSIGN_OR_RETURN(std::unique_ptr<Layer> layer, create(spec, input_shape));
      return std::unique_ptr<Layer>(
          std::make_unique<ProbedLayer>(std::move(layer), takes_bf16, seen));
    };
  };
  GPIPE_CHECK(registry.Register("linear", probed(&Linear::Create)).ok());
  GPIPE_CHECK(
      registry.Register("causal_self_attention", probed(&CausalSelfAttention::Create)).ok());
  GPIPE_CHECK(registry.Register("gelu", LeafLayerFactory(&Gelu::Create)).ok());
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
};

// One forward and backward of the plan's single layer in bf16 mixed precision (Bf16Layer, as
// StageChunks makes it), its parameters initialized from seed 7.
Bf16Run RunBf16(const char* plan, bool layers_take_bf16) {
  Bf16Run run;
  const LayerRegistry registry = ProbedRegistry(layers_take_bf16, &run.seen);
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
  // The input as the previous stage hands it: bf16.
  auto x = NarrowedToBf16(device, testing::UniformTensor(device, Shape{2, 6, 8}, 11, -2.0f, 2.0f),
                          MemoryKind::kActivation);
  GPIPE_CHECK(x.ok()) << x.status();
  SavedTensors saved;
  auto y = layer.Forward(ctx, *operands, *x, saved);
  GPIPE_CHECK(y.ok()) << y.status();
  for (const Tensor& t : saved.tensors) run.saved_bytes += t.defined() ? t.bytes() : 0;
  auto dy = NarrowedToBf16(device, testing::UniformTensor(device, Shape{2, 6, 8}, 23, -2.0f, 2.0f),
                           MemoryKind::kActivation);
  GPIPE_CHECK(dy.ok()) << dy.status();
  auto dx = layer.Backward(ctx, *operands, store->grads_of(0), saved, *dy);
  GPIPE_CHECK(dx.ok()) << dx.status();
  run.y = Bytes(*y);
  run.dx = Bytes(*dx);
  for (const Tensor& g : store->grads_of(0)) run.grads.push_back(Bytes(g));
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
           Case{kResidualMlp, {"linear f32", "linear bf16"}, {"linear bf16", "linear bf16"}},
           Case{kTransformerBlock,
                {"causal_self_attention bf16", "linear bf16", "linear bf16"},
                {"linear bf16", "linear bf16", "causal_self_attention bf16"}},
       }) {
    SCOPED_TRACE(c.plan);
    const Bf16Run taking = RunBf16(c.plan, /*layers_take_bf16=*/true);
    const Bf16Run widened = RunBf16(c.plan, /*layers_take_bf16=*/false);
    EXPECT_EQ(taking.seen.forward_inputs, c.forward);
    EXPECT_EQ(taking.seen.backward_inputs, c.backward);
    for (const std::string& entry : widened.seen.forward_inputs) {
      EXPECT_TRUE(entry.ends_with(" f32")) << entry;
    }
    for (const std::string& entry : widened.seen.backward_inputs) {
      EXPECT_TRUE(entry.ends_with(" f32")) << entry;
    }
    EXPECT_FALSE(taking.y.empty());
    EXPECT_EQ(taking.y, widened.y);
    EXPECT_EQ(taking.dx, widened.dx);
    EXPECT_EQ(taking.grads, widened.grads);
    EXPECT_EQ(taking.saved_bytes, widened.saved_bytes);
  }
}

}  // namespace
}  // namespace gpipe
