// SimLayer, SimLoss, SimOptimizer and ShapeOnlyDataset: shape-only outputs and gradients of the
// real layer's shapes, saved tensors of the sizes the real layer declares (so activation memory
// matches the planner), the split backward mirrored, each op occupying its modelled time.
#include "runtime/backend/sim/sim_layer.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/backend/sim/sim_dataset.h"
#include "runtime/backend/sim/sim_loss.h"
#include "runtime/backend/sim/sim_optimizer.h"
#include "runtime/data/dataset.h"
#include "runtime/train/optimizer.h"
#include "tests/layers/make_layer.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/data/open_dataset.h"

namespace gpipe {
namespace {

constexpr int64_t kBatch = 4;
const SimOpTimes kTimes{.forward = absl::Microseconds(30),
                        .backward_input = absl::Microseconds(20),
                        .backward_weight = absl::Microseconds(10)};

std::unique_ptr<SimLayer> Simulated(SimDevice& device, const std::string& text,
                                    const Shape& input_shape) {
  return std::make_unique<SimLayer>(testing::MakeLayer(text, input_shape), device, kTimes);
}

// Shape-only parameters (or gradients) of `layer` on `device`.
std::vector<Tensor> ParametersOf(SimDevice& device, const Layer& layer, MemoryKind kind) {
  std::vector<Tensor> out;
  for (const ParamSpec& spec : layer.parameter_specs()) {
    out.push_back(*Tensor::Empty(device, spec.shape, DType::kF32, kind));
  }
  return out;
}

// Bytes the layer declares it keeps beyond its input and output for a batch.
int64_t DeclaredNewBytes(const Layer& layer, int64_t batch) {
  int64_t bytes = 0;
  for (const SavedSpec& spec : layer.SavedPerSample())
    bytes += spec.NewBytes(batch, SizeOf(layer.output_dtype()));
  return bytes;
}

TEST(SimLayerTest, ReportsTheRealLayersInterface) {
  SimDevice device;
  auto layer = Simulated(device, "name: 'fc' linear { out_features: 3 }", Shape({5}));
  EXPECT_EQ(layer->name(), "fc");
  EXPECT_EQ(layer->type(), "linear");
  EXPECT_EQ(layer->output_shape(), Shape({3}));
  EXPECT_EQ(layer->parameter_specs().size(), 2u);
  EXPECT_EQ(layer->ForwardFlopsPerSample(), layer->inner().ForwardFlopsPerSample());
  EXPECT_EQ(layer->SplitsBackward(), layer->inner().SplitsBackward());
  EXPECT_TRUE(layer->SplitsBackward());
}

TEST(SimLayerTest, ForwardKeepsWhatTheRealLayerDeclaresAndOccupiesTheForwardTime) {
  const std::vector<std::pair<std::string, Shape>> layers = {
      {"name: 'fc' linear { out_features: 6 }", Shape({5})},
      {"name: 'act' gelu {}", Shape({5})},
      {"name: 'drop' dropout { p: 0.5 }", Shape({5})},
      {"name: 'norm' layer_norm {}", Shape({3, 8})},
      {"name: 'block' transformer_block { num_heads: 2 }", Shape({3, 8})},
  };
  for (const auto& [text, input_shape] : layers) {
    SCOPED_TRACE(text);
    SimDevice device;
    auto layer = Simulated(device, text, input_shape);
    const std::vector<Tensor> params = ParametersOf(device, *layer, MemoryKind::kParameter);
    const Tensor x =
        *Tensor::Empty(device, input_shape.WithBatch(kBatch), DType::kF32, MemoryKind::kBoundary);
    const int64_t before = device.memory().current(MemoryKind::kActivation);
    SavedTensors saved;
    LayerContext ctx{.device = device};
    absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(y->shape(), layer->output_shape().WithBatch(kBatch));
    const std::vector<SavedSpec> specs = layer->SavedPerSample();
    ASSERT_EQ(saved.tensors.size(), specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].ref == SavedRef::kInput) {
        EXPECT_TRUE(saved.tensors[i].SharesStorageWith(x));
      } else if (specs[i].ref == SavedRef::kOutput) {
        EXPECT_TRUE(saved.tensors[i].SharesStorageWith(*y));
      }
    }
    const int64_t output_bytes = layer->OutputAliasesInput() ? 0 : y->bytes();
    EXPECT_EQ(device.memory().current(MemoryKind::kActivation) - before,
              output_bytes + DeclaredNewBytes(*layer, kBatch));
    EXPECT_EQ(device.occupied(), kTimes.forward);
  }
}

TEST(SimLayerTest, InferenceKeepsNothing) {
  SimDevice device;
  auto layer = Simulated(device, "name: 'act' gelu {}", Shape({5}));
  const Tensor x = *Tensor::Empty(device, Shape({kBatch, 5}), DType::kF32, MemoryKind::kBoundary);
  SavedTensors saved;
  LayerContext ctx{.device = device, .training = false};
  ASSERT_TRUE(layer->Forward(ctx, {}, x, saved).ok());
  EXPECT_TRUE(saved.tensors.empty());
}

TEST(SimLayerTest, OutputOfAViewIsItsInput) {
  SimDevice device;
  auto layer = Simulated(device, "name: 'flat' flatten {}", Shape({2, 3}));
  ASSERT_TRUE(layer->OutputAliasesInput());
  const Tensor x =
      *Tensor::Empty(device, Shape({kBatch, 2, 3}), DType::kF32, MemoryKind::kBoundary);
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(LayerContext{.device = device}, {}, x, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), Shape({kBatch, 6}));
  EXPECT_TRUE(y->SharesStorageWith(x));
}

TEST(SimLayerTest, BackwardHalvesOccupyTheirOwnTimes) {
  SimDevice device;
  auto layer = Simulated(device, "name: 'fc' linear { out_features: 6 }", Shape({5}));
  const std::vector<Tensor> params = ParametersOf(device, *layer, MemoryKind::kParameter);
  std::vector<Tensor> grads = ParametersOf(device, *layer, MemoryKind::kGradient);
  const Tensor dy =
      *Tensor::Empty(device, Shape({kBatch, 6}), DType::kF32, MemoryKind::kBoundaryGrad);
  const LayerContext ctx{.device = device};
  SavedTensors saved;

  absl::StatusOr<Tensor> dx = layer->Backward(ctx, params, grads, saved, dy);
  ASSERT_TRUE(dx.ok()) << dx.status();
  EXPECT_EQ(dx->shape(), Shape({kBatch, 5}));
  EXPECT_EQ(device.occupied(), kTimes.backward_input + kTimes.backward_weight);

  absl::StatusOr<Tensor> dx_only = layer->BackwardInput(ctx, params, saved, dy);
  ASSERT_TRUE(dx_only.ok()) << dx_only.status();
  EXPECT_EQ(dx_only->shape(), Shape({kBatch, 5}));
  EXPECT_EQ(device.occupied(), 2 * kTimes.backward_input + kTimes.backward_weight);
  ASSERT_TRUE(layer->BackwardWeight(ctx, grads, saved, dy).ok());
  EXPECT_EQ(device.occupied(), 2 * (kTimes.backward_input + kTimes.backward_weight));

  // The model's first layer: no input gradient.
  LayerContext first = ctx;
  first.need_input_grad = false;
  absl::StatusOr<Tensor> none = layer->Backward(first, params, grads, saved, dy);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->defined());
}

TEST(SimLayerTest, ALayerThatDoesNotSplitRunsItsWholeBackwardAtOnce) {
  SimDevice device;
  auto layer = Simulated(device, "name: 'act' relu {}", Shape({5}));
  ASSERT_FALSE(layer->SplitsBackward());
  const Tensor dy =
      *Tensor::Empty(device, Shape({kBatch, 5}), DType::kF32, MemoryKind::kBoundaryGrad);
  const LayerContext ctx{.device = device};
  EXPECT_EQ(layer->BackwardInput(ctx, {}, SavedTensors{}, dy).status().code(),
            absl::StatusCode::kUnimplemented);
  ASSERT_TRUE(layer->Backward(ctx, {}, {}, SavedTensors{}, dy).ok());
  EXPECT_EQ(device.occupied(), kTimes.backward_input + kTimes.backward_weight);
}

TEST(SimLossTest, GradientIsShapedLikeTheOutput) {
  SimDevice device;
  SimLoss loss(testing::MakeLoss("softmax_cross_entropy {}"), device, absl::Microseconds(7));
  const Tensor output =
      *Tensor::Empty(device, Shape({kBatch, 10}), DType::kF32, MemoryKind::kActivation);
  const Tensor targets = *Tensor::Empty(device, Shape({kBatch}), DType::kI64, MemoryKind::kData);
  Tensor totals = *Tensor::Empty(device, Shape({2}), DType::kF64, MemoryKind::kWorkspace);
  absl::StatusOr<Tensor> grad = loss.Compute(device, output, targets, 16, totals);
  ASSERT_TRUE(grad.ok()) << grad.status();
  EXPECT_FALSE(loss.counts_correct());
  EXPECT_EQ(grad->shape(), output.shape());
  EXPECT_EQ(device.occupied(), absl::Microseconds(7));
  EXPECT_EQ(loss.target_dtype(), DType::kI64);
}

TEST(SimOptimizerTest, AllocatesTheRealOptimizersStateOnce) {
  SimDevice device;
  pb::Optimizer spec;
  spec.mutable_adam()->set_lr(0.01);
  ASSERT_EQ(OptimizerStatePerParameter(spec), 2);
  SimOptimizer optimizer(*CreateOptimizer(spec), device, OptimizerStatePerParameter(spec),
                         absl::Microseconds(5));
  EXPECT_EQ(optimizer.base_lr(), 0.01);
  std::vector<Tensor> values = {
      *Tensor::Empty(device, Shape({6, 5}), DType::kF32, MemoryKind::kParameter),
      *Tensor::Empty(device, Shape({6}), DType::kF32, MemoryKind::kParameter)};
  const std::vector<Tensor> grads = {
      *Tensor::Empty(device, Shape({6, 5}), DType::kF32, MemoryKind::kGradient),
      *Tensor::Empty(device, Shape({6}), DType::kF32, MemoryKind::kGradient)};
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(optimizer.Step(device, 0.01, values, grads).ok());
    EXPECT_EQ(device.memory().current(MemoryKind::kOptimizerState), 2 * (30 + 6) * 4);
  }
  EXPECT_EQ(optimizer.steps(), 3);
  EXPECT_EQ(device.occupied(), absl::Microseconds(15));

  pb::Optimizer sgd;
  sgd.mutable_sgd()->set_lr(0.1);
  EXPECT_EQ(OptimizerStatePerParameter(sgd), 0);
  sgd.mutable_sgd()->set_momentum(0.9);
  EXPECT_EQ(OptimizerStatePerParameter(sgd), 1);
}

TEST(ShapeOnlyDatasetTest, ChecksShapesAndIndicesAndWritesNothing) {
  pb::Data data;
  data.mutable_synthetic()->set_num_samples(32);
  DataRequirements requirements;
  requirements.input_shape = Shape({5});
  requirements.target_shape = Shape();
  requirements.target_dtype = DType::kI64;
  requirements.num_classes = 3;
  absl::StatusOr<std::unique_ptr<Dataset>> real = OpenDataset(data, requirements);
  ASSERT_TRUE(real.ok()) << real.status();
  ShapeOnlyDataset dataset(*std::move(real));
  EXPECT_EQ(dataset.size(), 32);
  SimDevice device;
  Tensor inputs = *Tensor::Empty(device, Shape({2, 5}), DType::kF32, MemoryKind::kBoundary);
  const std::vector<int64_t> indices = {3, kPaddingSample};
  EXPECT_TRUE(dataset.GatherInputs(indices, inputs).ok());
  const std::vector<int64_t> out_of_range = {3, 32};
  EXPECT_EQ(dataset.GatherInputs(out_of_range, inputs).code(), absl::StatusCode::kOutOfRange);
  Tensor wrong = *Tensor::Empty(device, Shape({2, 4}), DType::kF32, MemoryKind::kBoundary);
  EXPECT_EQ(dataset.GatherInputs(indices, wrong).code(), absl::StatusCode::kInvalidArgument);
  Tensor targets = *Tensor::Empty(device, Shape({2}), DType::kI64, MemoryKind::kData);
  EXPECT_TRUE(dataset.GatherTargets(indices, targets).ok());
}

}  // namespace
}  // namespace gpipe
