// Memory discipline of every built-in layer and loss: everything is allocated through the
// device, outputs and saved tensors as kActivation, nothing else (parameters, gradients, data)
// grows, no workspace outlives a call, and the device's bytes return to where they started
// once outputs and saved tensors are dropped. Out-of-memory surfaces as a Status.
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/gradient_check.h"
#include "tests/layers/make_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

constexpr MemoryKind kKindsLayersMustNotTouch[] = {MemoryKind::kParameter, MemoryKind::kGradient,
                                                   MemoryKind::kOptimizerState,
                                                   MemoryKind::kBoundary, MemoryKind::kData};

struct Snapshot {
  int64_t total = 0;
  std::vector<int64_t> by_kind;
};

Snapshot Take(Device& device) {
  Snapshot s;
  s.total = device.memory().current();
  for (int k = 0; k < MemoryTracker::kKinds; ++k) {
    s.by_kind.push_back(device.memory().current(static_cast<MemoryKind>(k)));
  }
  return s;
}

int64_t Delta(const Snapshot& before, const Snapshot& after, MemoryKind kind) {
  return after.by_kind[static_cast<int>(kind)] - before.by_kind[static_cast<int>(kind)];
}

// Bytes of `tensors` whose storage is new, i.e. not shared with any of `existing`.
int64_t NewBytes(const std::vector<Tensor>& tensors, const std::vector<Tensor>& existing) {
  int64_t bytes = 0;
  std::vector<Tensor> seen = existing;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    bool shared = false;
    for (const Tensor& e : seen) shared = shared || (e.defined() && t.SharesStorageWith(e));
    if (!shared) bytes += t.bytes();
    seen.push_back(t);
  }
  return bytes;
}

void ExpectOnlyActivationsGrew(const Snapshot& before, const Snapshot& after,
                               int64_t expected_activation_bytes) {
  for (MemoryKind kind : kKindsLayersMustNotTouch) {
    EXPECT_EQ(Delta(before, after, kind), 0) << MemoryKindName(kind);
  }
  EXPECT_EQ(Delta(before, after, MemoryKind::kWorkspace), 0) << "workspace outlived the call";
  EXPECT_EQ(Delta(before, after, MemoryKind::kActivation), expected_activation_bytes);
  EXPECT_EQ(after.total - before.total, expected_activation_bytes);
}

class LayerMemoryTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LayerMemoryTest, AllocatesOnlyActivationsAndReturnsEveryByte) {
  CpuDevice device;
  std::unique_ptr<Layer> layer = MakeLayer(GetParam(), Shape{3, 8});
  const Snapshot start = Take(device);
  {
    const std::vector<Tensor> params = UniformParams(*layer, device, 1);
    std::vector<Tensor> grads = ZeroGrads(*layer, device);
    const Tensor x = UniformTensor(device, Shape{4, 3, 8}, 2, -1.0f, 1.0f);
    const LayerContext ctx{.device = device, .seed = 3};

    const Snapshot before_forward = Take(device);
    SavedTensors saved;
    absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
    ASSERT_TRUE(y.ok()) << y.status();
    std::vector<Tensor> forward_outputs = {*y};
    for (const Tensor& t : saved.tensors) forward_outputs.push_back(t);
    ExpectOnlyActivationsGrew(before_forward, Take(device), NewBytes(forward_outputs, {x}));

    const Tensor dy = UniformTensor(device, y->shape(), 4, -1.0f, 1.0f);
    const Snapshot before_backward = Take(device);
    absl::StatusOr<Tensor> dx = layer->Backward(ctx, params, grads, saved, dy);
    ASSERT_TRUE(dx.ok()) << dx.status();
    ExpectOnlyActivationsGrew(before_backward, Take(device), NewBytes({*dx}, {dy}));
    EXPECT_EQ(dx->shape(), x.shape());
  }
  EXPECT_EQ(device.memory().current(), start.total);
  EXPECT_EQ(device.memory().current(), 0);
}

TEST_P(LayerMemoryTest, OutOfDeviceMemoryIsAStatusNotACrash) {
  CpuDevice device(CpuDeviceOptions{.memory_limit_bytes = 4096});
  std::unique_ptr<Layer> layer = MakeLayer(GetParam(), Shape{3, 8});
  const std::vector<Tensor> params = UniformParams(*layer, device, 1);
  // The input takes the room left, so the layer's own allocations cannot fit.
  const Tensor x = UniformTensor(device, Shape{40, 3, 8}, 2, -1.0f, 1.0f);
  const LayerContext ctx{.device = device, .seed = 3};
  SavedTensors saved;
  absl::StatusOr<Tensor> y = layer->Forward(ctx, params, x, saved);
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kResourceExhausted);
}

INSTANTIATE_TEST_SUITE_P(EveryLayer, LayerMemoryTest,
                         ::testing::Values("name: 'a' linear { out_features: 5 }",
                                           "name: 'a' relu {}", "name: 'a' gelu {}",
                                           "name: 'a' tanh {}", "name: 'a' layer_norm {}",
                                           "name: 'a' dropout { p: 0.3 }"));

TEST(LossMemoryTest, GradientIsAnActivationAndEveryByteReturns) {
  CpuDevice device;
  for (const char* text : {"softmax_cross_entropy {}", "mse {}"}) {
    SCOPED_TRACE(text);
    std::unique_ptr<Loss> loss = MakeLoss(text);
    const Tensor output = UniformTensor(device, Shape{4, 6}, 1, -1.0f, 1.0f);
    const Tensor targets = loss->target_dtype() == DType::kI64
                               ? I64Tensor(device, Shape{4}, {0, 5, 2, 1})
                               : UniformTensor(device, Shape{4, 6}, 2, -1.0f, 1.0f);
    const Snapshot before = Take(device);
    {
      absl::StatusOr<LossResult> result = ComputeLoss(*loss, device, output, targets, 8);
      ASSERT_TRUE(result.ok()) << result.status();
      ExpectOnlyActivationsGrew(before, Take(device), result->grad.bytes());
    }
    EXPECT_EQ(device.memory().current(), before.total);
  }
}

}  // namespace
}  // namespace gpipe::testing
