// The bf16 copies of product operands (training.precision BF16; ParameterStore::
// ProductOperandsOf): which parameters get one, that a copy is the rounded value and follows the
// values through every writer's door (values(), Import), what it costs in parameter memory, that
// every layer kind with product weights computes the same bits from its copies as from rounding
// its f32 weights per product, and that training with the copies gives the weights of training
// without them.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/core/bf16.h"
#include "runtime/core/check.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/device/ops.h"
#include "runtime/exec/bf16_layer.h"
#include "runtime/exec/bf16_loss.h"
#include "runtime/exec/parameter_store.h"
#include "runtime/exec/stage_model.h"
#include "tests/exec/pipeline_harness.h"
#include "tests/layers/pass_through_layer.h"

namespace gpipe {
namespace {

// Per-sample input [6, 8]; every layer kind whose parameters enter products, composites too.
constexpr char kModel[] = R"pb(
  input { shape: [ 6, 8 ] }
  layers {
    name: "fc"
    linear { out_features: 8 }
  }
  layers {
    name: "norm"
    layer_norm {}
  }
  layers {
    name: "attn"
    causal_self_attention { num_heads: 2 }
  }
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
  layers {
    name: "block"
    transformer_block { num_heads: 2 }
  }
  layers {
    name: "llama"
    llama_block { num_heads: 2 num_kv_heads: 1 intermediate_size: 12 }
  }
  layers {
    name: "head"
    linear { out_features: 5 bias: false }
  }
  loss { softmax_cross_entropy {} }
)pb";

constexpr int64_t kBatch = 2;

// The stage model of kModel, each layer in bf16 mixed precision as StageChunks makes it.
StageModel Bf16Model(const LayerRegistry& registry) {
  pb::Model proto;
  GPIPE_CHECK(google::protobuf::TextFormat::ParseFromString(kModel, &proto));
  auto model = StageModel::Create(proto, 0, proto.layers_size(), Shape{6, 8}, registry);
  GPIPE_CHECK(model.ok()) << model.status();
  model->Decorate(
      [](std::unique_ptr<Layer> layer, int) -> std::unique_ptr<Layer> {
        return std::make_unique<Bf16Layer>(std::move(layer));
      },
      [](std::unique_ptr<Loss> loss) -> std::unique_ptr<Loss> {
        return std::make_unique<Bf16Loss>(std::move(loss));
      });
  return *std::move(model);
}

Tensor Filled(Device& device, const Shape& shape, uint64_t seed) {
  auto tensor = Tensor::Empty(device, shape, DType::kF32, MemoryKind::kActivation);
  GPIPE_CHECK(tensor.ok()) << tensor.status();
  float* data = tensor->data<float>();
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < tensor->num_elements(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    data[i] = static_cast<float>(static_cast<int64_t>(state >> 40) % 2001 - 1000) / 1000.0f;
  }
  return *std::move(tensor);
}

// The bytes of a CPU tensor.
std::vector<uint8_t> Bytes(const Tensor& tensor) {
  const auto* data = static_cast<const uint8_t*>(tensor.raw_data());
  return std::vector<uint8_t>(data, data + tensor.bytes());
}

// The values of a CPU tensor, f32 or bf16, as floats.
std::vector<float> Values(const Tensor& tensor) {
  std::vector<float> out(tensor.num_elements());
  const auto* bf16 = static_cast<const uint16_t*>(tensor.raw_data());
  for (int64_t i = 0; i < tensor.num_elements(); ++i) {
    out[i] = tensor.dtype() == DType::kBF16 ? FromBf16(bf16[i]) : tensor.data<float>()[i];
  }
  return out;
}

std::vector<float> Rounded(std::vector<float> values) {
  for (float& v : values) v = RoundToBf16(v);
  return values;
}

TEST(Bf16ProductCopiesTest, OnlyProductOperandsGetACopyThatFollowsTheValues) {
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  CpuDevice device;
  const StageModel model = Bf16Model(registry);
  const int64_t before = device.memory().current(MemoryKind::kParameter);
  auto without = ParameterStore::Create(device, model, 7);
  ASSERT_TRUE(without.ok()) << without.status();
  const int64_t plain = device.memory().current(MemoryKind::kParameter) - before;
  auto with = ParameterStore::Create(device, model, 7, {}, /*bf16_product_copies=*/true);
  ASSERT_TRUE(with.ok()) << with.status();
  ParameterStore& store = *with;
  // fc [8, 8], attn qkv [24, 8] and proj [8, 8], mlp up [16, 8] and down [8, 16], block's
  // attention (the same two) and its MLP ([32, 8], [8, 32]: 4 x its width), llama's q [8, 8],
  // k and v [4, 8], o [8, 8], gate and up [12, 8], down [8, 12], head [5, 8]: 2 bytes each.
  const int64_t product_elements = 64 + (192 + 64) + (128 + 128) + (192 + 64 + 256 + 256) +
                                   (64 + 32 + 32 + 64 + 96 + 96 + 96) + 40;
  // The copies are parameter memory: the second store holds the first's bytes and 2 per element.
  EXPECT_EQ(device.memory().current(MemoryKind::kParameter) - before - plain,
            plain + 2 * product_elements);

  for (int l = 0; l < model.num_layers(); ++l) {
    SCOPED_TRACE(model.layer(l).name());
    const std::vector<ParamSpec> specs = model.layer(l).parameter_specs();
    auto operands = store.ProductOperandsOf(l);
    ASSERT_TRUE(operands.ok()) << operands.status();
    const std::span<const Tensor> values = store.values_of(l);
    ASSERT_EQ(operands->size(), values.size());
    for (size_t p = 0; p < values.size(); ++p) {
      SCOPED_TRACE(specs[p].name);
      const Tensor& operand = (*operands)[p];
      if (specs[p].product_operand) {
        EXPECT_EQ(operand.dtype(), DType::kBF16);
        EXPECT_EQ(operand.shape(), values[p].shape());
        EXPECT_EQ(Values(operand), Rounded(Values(values[p])));
      } else {
        EXPECT_EQ(operand.raw_data(), values[p].raw_data()) << "not the value itself";
      }
    }
    // The FP32 store hands out the values.
    auto plain_operands = without->ProductOperandsOf(l);
    ASSERT_TRUE(plain_operands.ok());
    for (size_t p = 0; p < values.size(); ++p) {
      EXPECT_EQ((*plain_operands)[p].raw_data(), without->values_of(l)[p].raw_data());
    }
  }

  // An update writes through values(): the next call makes the copies again.
  const TensorOps& ops = device.ops().tensor;
  ASSERT_TRUE(ops.Fill(store.values()[0], 0.3).ok());
  auto after_update = store.ProductOperandsOf(0);
  ASSERT_TRUE(after_update.ok());
  EXPECT_EQ(Values((*after_update)[0]), std::vector<float>(64, RoundToBf16(0.3f)));
  // The contract: writers take the values mutable (or Import). A write through a handle kept from
  // before is not seen until then.
  Tensor kept = store.values_of(0)[0];
  ASSERT_TRUE(ops.Fill(kept, 0.7).ok());
  EXPECT_EQ(Values((*store.ProductOperandsOf(0))[0]), std::vector<float>(64, RoundToBf16(0.3f)));
  (void)store.values();
  EXPECT_EQ(Values((*store.ProductOperandsOf(0))[0]), std::vector<float>(64, RoundToBf16(0.7f)));
  // A checkpoint restored (Import) is seen too.
  auto exported = without->Export();
  ASSERT_TRUE(exported.ok());
  ASSERT_TRUE(store.Import(*exported).ok());
  EXPECT_EQ(Values((*store.ProductOperandsOf(0))[0]), Rounded(Values(without->values_of(0)[0])));
}

// Forward and backward of every layer from its copies against the same layer with its f32
// weights (each product rounding them): output, input gradient and parameter gradients have the
// same bytes.
TEST(Bf16ProductCopiesTest, EveryLayerComputesTheSameBitsFromItsCopies) {
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  CpuDevice device;
  const StageModel model = Bf16Model(registry);
  auto created = ParameterStore::Create(device, model, 7, {}, /*bf16_product_copies=*/true);
  ASSERT_TRUE(created.ok()) << created.status();
  ParameterStore& store = *created;
  int layers_with_copies = 0;
  for (int l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    SCOPED_TRACE(layer.name());
    auto operands = store.ProductOperandsOf(l);
    ASSERT_TRUE(operands.ok()) << operands.status();
    bool has_copy = false;
    for (const Tensor& t : *operands) has_copy |= t.dtype() == DType::kBF16;
    layers_with_copies += has_copy;
    const Tensor x = Filled(device, layer.input_shape().WithBatch(kBatch), 11 + l);
    const Tensor dy = Filled(device, layer.output_shape().WithBatch(kBatch), 23 + l);
    const LayerContext ctx{.device = device, .seed = 5, .layer_index = l};
    struct Result {
      std::vector<uint8_t> y, dx;
      std::vector<std::vector<uint8_t>> grads;
    };
    const auto run = [&](std::span<const Tensor> params) -> Result {
      Result result;
      EXPECT_TRUE(store.ZeroGrads().ok());
      SavedTensors saved;
      auto y = layer.Forward(ctx, params, x, saved);
      EXPECT_TRUE(y.ok()) << y.status();
      if (!y.ok()) return result;
      auto dx = layer.Backward(ctx, params, store.grads_of(l), saved, dy);
      EXPECT_TRUE(dx.ok()) << dx.status();
      if (!dx.ok()) return result;
      result.y = Bytes(*y);
      result.dx = Bytes(*dx);
      for (const Tensor& g : store.grads_of(l)) result.grads.push_back(Bytes(g));
      return result;
    };
    const Result rounded_per_product = run(store.values_of(l));
    const Result from_copies = run(*operands);
    EXPECT_FALSE(rounded_per_product.y.empty());
    EXPECT_EQ(from_copies.y, rounded_per_product.y);
    EXPECT_EQ(from_copies.dx, rounded_per_product.dx);
    EXPECT_EQ(from_copies.grads, rounded_per_product.grads);
  }
  EXPECT_EQ(layers_with_copies, 6) << "all but the layer norm";
}

// Clears every parameter's product_operand flag: the store then keeps no copies and the products
// round the f32 weights, as before the copies existed.
class WithoutProductCopies final : public testing::PassThroughLayer {
 public:
  explicit WithoutProductCopies(std::unique_ptr<Layer> inner)
      : PassThroughLayer(std::move(inner)) {}
  std::vector<ParamSpec> parameter_specs() const override {
    std::vector<ParamSpec> specs = inner().parameter_specs();
    for (ParamSpec& spec : specs) spec.product_operand = false;
    return specs;
  }
};

// Three BF16 steps at two stages under 1F1B and a zero-bubble schedule (whose BackwardInput reads
// the copies too): the weights equal those of the same training rounding the f32 weights in every
// product. A copy left stale by an update would feed the next forward the old weights.
TEST(Bf16ProductCopiesTest, TrainingWithCopiesGivesTheWeightsOfRoundingPerProduct) {
  const ChunkAdapter no_copies = [](StageModel& model, std::unique_ptr<Optimizer>&) {
    model.Decorate(
        [](std::unique_ptr<Layer> layer, int) -> std::unique_ptr<Layer> {
          return std::make_unique<WithoutProductCopies>(std::move(layer));
        },
        [](std::unique_ptr<Loss> loss) { return loss; });
    return absl::OkStatus();
  };
  for (const char* schedule : {"ONE_F_ONE_B", "ZERO_BUBBLE_H1"}) {
    SCOPED_TRACE(schedule);
    const std::vector<std::string> overrides = {
        "training { precision: BF16 }",
        absl::StrCat("pipeline { stages: 2 schedule: ", schedule, " boundaries: ['norm2'] }")};
    const testing::PipelineRun with = testing::RunPipeline({.stages = 2, .overrides = overrides});
    const testing::PipelineRun without =
        testing::RunPipeline({.stages = 2, .overrides = overrides, .adapter = no_copies});
    testing::ExpectSucceeded(with);
    testing::ExpectSucceeded(without);
    ASSERT_FALSE(with.weights.empty());
    EXPECT_NE(with.weights, with.initial_weights);
    EXPECT_EQ(with.weights, without.weights);
  }
}

}  // namespace
}  // namespace gpipe
