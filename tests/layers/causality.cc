#include "tests/layers/causality.h"

#include <vector>

#include "gtest/gtest.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {

void ExpectCausal(const Layer& layer, uint64_t seed) {
  CpuDevice device;
  ASSERT_EQ(layer.input_shape().rank(), 2) << layer.name();
  const int64_t positions = layer.input_shape().dim(0);
  const int64_t features = layer.input_shape().dim(1);
  const std::vector<Tensor> params = UniformParams(layer, device, seed);
  const Tensor x = UniformTensor(device, Shape{2, positions, features}, seed + 1, -1.0f, 1.0f);
  const LayerContext ctx{.device = device, .training = false};
  SavedTensors saved;
  absl::StatusOr<Tensor> reference = layer.Forward(ctx, params, x, saved);
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::vector<float> y0 = Values(*reference);
  for (int64_t changed = 0; changed < positions; ++changed) {
    SCOPED_TRACE(changed);
    absl::StatusOr<Tensor> perturbed = x.Clone(MemoryKind::kData);
    ASSERT_TRUE(perturbed.ok());
    for (int64_t i = 0; i < features; ++i) {
      perturbed->f32()[(positions + changed) * features + i] += 0.1f * static_cast<float>(i + 1);
    }
    saved.clear();
    absl::StatusOr<Tensor> y = layer.Forward(ctx, params, *perturbed, saved);
    ASSERT_TRUE(y.ok()) << y.status();
    const std::vector<float> y1 = Values(*y);
    for (int64_t t = 0; t < positions; ++t) {
      bool same = true;
      for (int64_t i = 0; i < features; ++i) {
        same = same && y1[(positions + t) * features + i] == y0[(positions + t) * features + i];
        EXPECT_EQ(y1[t * features + i], y0[t * features + i]);  // sample 0 is never touched
      }
      if (t < changed) {
        EXPECT_TRUE(same) << "position " << t << " saw position " << changed;
      } else {
        EXPECT_FALSE(same) << "position " << t << " did not see position " << changed;
      }
    }
  }
}

}  // namespace gpipe::testing
