// Layer::SavedPerSample against what Forward really keeps, for every layer kind: the same
// entries in the same order, kInput and kOutput entries sharing the input's and output's
// storage, kNew entries distinct allocations of exactly the declared bytes, and the device's
// activation bytes growing by the output plus the declared new bytes and nothing else, so a
// planner can predict a micro-batch's activation memory without running the stage.
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/make_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

struct SpecCase {
  std::string name;  // test suffix
  std::string spec;  // plan entry
  // Per-sample input shape; kSampleShape when unset.
  std::optional<Shape> input_shape;
  // When > 0, the input is i64 token ids in [0, vocab) instead of f32 values (embedding).
  int64_t vocab = 0;
};

void PrintTo(const SpecCase& c, std::ostream* os) { *os << c.name; }

const std::vector<SpecCase>& Cases() {
  static const auto* cases = new std::vector<SpecCase>{
      {"LinearWithBias", "name: 'a' linear { out_features: 5 }"},
      {"LinearWithoutBias", "name: 'a' linear { out_features: 5 bias: false }"},
      {"Relu", "name: 'a' relu {}"},
      {"Gelu", "name: 'a' gelu {}"},
      {"Tanh", "name: 'a' tanh {}"},
      {"LayerNormAffine", "name: 'a' layer_norm {}"},
      {"LayerNormWithoutAffine", "name: 'a' layer_norm { elementwise_affine: false }"},
      {"Dropout", "name: 'a' dropout { p: 0.3 }"},
      {"DropoutWithZeroProbability", "name: 'a' dropout { p: 0 }"},
      {"Conv2dWithBias", "name: 'a' conv2d { out_channels: 4 kernel_size: 3 padding: 1 }",
       Shape{2, 6, 5}},
      {"Conv2dGroupedWithoutBias",
       "name: 'a' conv2d { out_channels: 4 kernel_size: [3, 2] stride: 2 dilation: 2 groups: 2 "
       "bias: false }",
       Shape{4, 7, 6}},
      {"MaxPool2d", "name: 'a' max_pool2d { kernel_size: 3 stride: 2 padding: 1 }", Shape{2, 6, 5}},
      {"AvgPool2d", "name: 'a' avg_pool2d { kernel_size: 2 }", Shape{2, 6, 5}},
      {"GlobalAvgPool2d", "name: 'a' global_avg_pool2d {}", Shape{2, 6, 5}},
      {"Flatten", "name: 'a' flatten {}", Shape{2, 6, 5}},
      {"Embedding", "name: 'a' embedding { num_embeddings: 11 embedding_dim: 8 }", Shape{3}, 11},
      {"PositionalEmbedding", "name: 'a' positional_embedding { max_positions: 5 }"},
      {"CausalSelfAttention", "name: 'a' causal_self_attention { num_heads: 2 }"},
      {"CausalSelfAttentionWithoutBias",
       "name: 'a' causal_self_attention { num_heads: 4 bias: false }"},
      {"BatchNorm1dOnChannels", "name: 'a' batch_norm1d {}", Shape{4}},
      {"BatchNorm1dOnChannelsAndLength", "name: 'a' batch_norm1d {}", Shape{3, 8}},
      {"BatchNorm2d", "name: 'a' batch_norm2d {}", Shape{3, 4, 4}},
      {"BatchNorm2dWithoutAffine", "name: 'a' batch_norm2d { affine: false }", Shape{3, 4, 4}},
      {"ResidualLinearReluLinear",
       "name: 'a' residual { layers { name: 'fc1' linear { out_features: 8 } }"
       " layers { name: 'act' relu {} } layers { name: 'fc2' linear { out_features: 8 } } }"},
      // Its last layer saves its output, f(x), which is not the residual's output x + f(x).
      {"ResidualEndingInRelu",
       "name: 'a' residual { layers { name: 'fc' linear { out_features: 8 } }"
       " layers { name: 'act' relu {} } }"},
      {"ResidualConvBatchNorm",
       "name: 'a' residual {"
       " layers { name: 'conv1' conv2d { out_channels: 2 kernel_size: 3 padding: 1 } }"
       " layers { name: 'bn1' batch_norm2d {} } layers { name: 'act' relu {} }"
       " layers { name: 'conv2' conv2d { out_channels: 2 kernel_size: 3 padding: 1 } }"
       " layers { name: 'bn2' batch_norm2d {} } }",
       Shape{2, 4, 4}},
      {"TransformerBlock", "name: 'a' transformer_block { num_heads: 2 }"},
      {"RmsNorm", "name: 'a' rms_norm {}"},
      {"LlamaBlockGroupedQuery",
       "name: 'a' llama_block { num_heads: 2 num_kv_heads: 1 intermediate_size: 12 }"},
      {"LlamaBlockMultiHead", "name: 'a' llama_block { num_heads: 2 intermediate_size: 5 }"},
  };
  return *cases;
}

const Shape kSampleShape{3, 8};

const Shape& SampleShapeOf(const SpecCase& c) {
  return c.input_shape ? *c.input_shape : kSampleShape;
}

// `batch` samples of the case's input: f32 values, or token ids in [0, vocab) keyed by index.
Tensor SampleInput(Device& device, const SpecCase& c, int64_t batch) {
  const Shape shape = SampleShapeOf(c).WithBatch(batch);
  if (c.vocab == 0) return UniformTensor(device, shape, 2, -1.0f, 1.0f);
  std::vector<int64_t> ids(shape.num_elements());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 7 + 3) % c.vocab;
  return I64Tensor(device, shape, ids);
}

int64_t ActivationBytes(Device& device) { return device.memory().current(MemoryKind::kActivation); }

// The layer's buffers (batch norm's running statistics), as their specs initialize them; not
// activations, so they do not enter the byte counts.
std::vector<Tensor> InitialBuffers(const Layer& layer, Device& device) {
  std::vector<Tensor> buffers;
  for (const ParamSpec& spec : layer.buffer_specs()) {
    const float value = spec.init == ParamInit::kOnes ? 1.0f : 0.0f;
    buffers.push_back(F32Tensor(device, spec.shape,
                                std::vector<float>(spec.shape.num_elements(), value),
                                MemoryKind::kParameter));
  }
  return buffers;
}

// The bytes the spec promises for one training Forward on `batch` samples: the output (unless
// it is the input itself) plus every kNew entry.
int64_t PredictedBytes(const std::vector<SavedSpec>& specs, int64_t batch, const Tensor& x,
                       const Tensor& y, DType saved_activation_dtype = DType::kF32) {
  int64_t bytes = y.SharesStorageWith(x) ? 0 : y.bytes();
  for (const SavedSpec& spec : specs) bytes += spec.NewBytes(batch, SizeOf(saved_activation_dtype));
  return bytes;
}

class SavedSpecTest : public ::testing::TestWithParam<SpecCase> {};

TEST_P(SavedSpecTest, ForwardSavesExactlyWhatTheSpecDeclares) {
  std::unique_ptr<Layer> layer = MakeLayer(GetParam().spec, SampleShapeOf(GetParam()));
  const std::vector<SavedSpec> specs = layer->SavedPerSample();
  // Two batch sizes tell bytes per sample from bytes per call (batch norm trains on 2 or more);
  // under bf16 storage the activations a composite keeps inside take 2 bytes a value.
  for (const DType stored : {DType::kF32, DType::kBF16})
    for (int64_t batch : {2, 5}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(stored), " batch ", batch));
      const int64_t activation_size = SizeOf(stored);
      CpuDevice device;
      const std::vector<Tensor> params = UniformParams(*layer, device, 1);
      std::vector<Tensor> buffers = InitialBuffers(*layer, device);
      const Tensor x = SampleInput(device, GetParam(), batch);
      const LayerContext ctx{.device = device,
                             .training = true,
                             .seed = 3,
                             .step = 1,
                             .buffers = buffers,
                             .saved_activation_dtype = stored};
      const int64_t before = ActivationBytes(device);
      SavedTensors saved;
      absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
      ASSERT_TRUE(y.ok()) << y.status();

      ASSERT_EQ(saved.tensors.size(), specs.size());
      for (size_t i = 0; i < specs.size(); ++i) {
        SCOPED_TRACE(i);
        const Tensor& kept = saved.tensors[i];
        ASSERT_TRUE(kept.defined());
        switch (specs[i].ref) {
          case SavedRef::kInput:
            EXPECT_TRUE(kept.SharesStorageWith(x));
            EXPECT_EQ(specs[i].NewBytes(batch, activation_size), 0);
            break;
          case SavedRef::kOutput:
            EXPECT_TRUE(kept.SharesStorageWith(*y));
            EXPECT_EQ(specs[i].NewBytes(batch, activation_size), 0);
            break;
          case SavedRef::kNew:
            EXPECT_FALSE(kept.SharesStorageWith(x));
            EXPECT_FALSE(kept.SharesStorageWith(*y));
            for (size_t j = 0; j < i; ++j) EXPECT_FALSE(kept.SharesStorageWith(saved.tensors[j]));
            EXPECT_EQ(kept.bytes(), specs[i].NewBytes(batch, activation_size));
            if (specs[i].activation_elements_per_sample > 0) {
              EXPECT_EQ(kept.dtype(), stored);
            }
            EXPECT_EQ(kept.memory_kind(), MemoryKind::kActivation);
            break;
        }
      }
      // The tracker sees allocations, not views: this pins that each kNew entry is its own
      // allocation of exactly its declared size and that Forward kept nothing undeclared.
      EXPECT_EQ(ActivationBytes(device) - before, PredictedBytes(specs, batch, x, *y, stored));
    }
}

TEST_P(SavedSpecTest, EvaluationSavesNoMoreThanTraining) {
  std::unique_ptr<Layer> layer = MakeLayer(GetParam().spec, SampleShapeOf(GetParam()));
  const std::vector<SavedSpec> specs = layer->SavedPerSample();
  const int64_t batch = 4;
  CpuDevice device;
  const std::vector<Tensor> params = UniformParams(*layer, device, 1);
  std::vector<Tensor> buffers = InitialBuffers(*layer, device);
  const Tensor x = SampleInput(device, GetParam(), batch);
  const LayerContext ctx{.device = device, .training = false, .buffers = buffers};
  const int64_t before = ActivationBytes(device);
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_LE(saved.tensors.size(), specs.size());
  EXPECT_LE(ActivationBytes(device) - before, PredictedBytes(specs, batch, x, *y));
}

INSTANTIATE_TEST_SUITE_P(EveryLayerKind, SavedSpecTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<SpecCase>& info) {
                           return info.param.name;
                         });

// A new layer kind in the plan needs a case above before its spec is trusted (custom layers'
// specs are their program's to state).
TEST(SavedSpecCoverageTest, EveryPlanLayerKindHasACase) {
  const auto* oneof = pb::Layer::descriptor()->FindOneofByName("kind");
  for (int i = 0; i < oneof->field_count(); ++i) {
    const std::string kind(oneof->field(i)->name());
    // Skip joins run through ForwardJoin, whose (empty) saved tensors skip_join_test.cc pins.
    if (kind == "custom" || kind == "skip_add" || kind == "skip_concat") continue;
    bool covered = false;
    for (const SpecCase& c : Cases()) {
      covered = covered || LayerRegistry::KindOf(ParseLayer(c.spec)) == kind;
    }
    EXPECT_TRUE(covered) << "no SavedSpecTest case for layer kind '" << kind << "'";
  }
}

TEST(SavedSpecValuesTest, DeclaredBytesOfTheBuiltinsWithNewStorage) {
  // layer_norm: [rows, 3] f32 statistics, 3 rows per {3, 8} sample.
  const std::vector<SavedSpec> norm =
      MakeLayer("name: 'a' layer_norm {}", kSampleShape)->SavedPerSample();
  ASSERT_EQ(norm.size(), 2u);
  EXPECT_EQ(norm[0].ref, SavedRef::kInput);
  EXPECT_EQ(norm[1].ref, SavedRef::kNew);
  EXPECT_EQ(norm[1].bytes_per_sample, 3 * 3 * 4);
  EXPECT_EQ(norm[1].bytes_per_call, 0);
  // dropout: a record of the forward's element count with no elements, so no bytes.
  const std::vector<SavedSpec> drop =
      MakeLayer("name: 'a' dropout { p: 0.5 }", kSampleShape)->SavedPerSample();
  ASSERT_EQ(drop.size(), 1u);
  EXPECT_EQ(drop[0].ref, SavedRef::kNew);
  EXPECT_EQ(drop[0].bytes_per_sample, 0);
  EXPECT_EQ(drop[0].bytes_per_call, 0);
  EXPECT_EQ(drop[0].NewBytes(1000, 4), 0);
}

}  // namespace
}  // namespace gpipe::testing
