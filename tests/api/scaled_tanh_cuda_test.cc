// The embedding example's scaled_tanh layer: its CUDA kernels (examples/embed/scaled_tanh_cuda.cc)
// against its CPU kernel on the same values, forward and backward (fp32: relative 1e-5; tanhf on
// the GPU and the host differ by an ulp or two). Skips where no GPU is visible.
#include "examples/embed/scaled_tanh_cuda.h"

#include <memory>
#include <vector>

#include "examples/embed/scaled_tanh.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/device/cuda/cuda_device.h"
#include "tests/layers/test_tensors.h"

namespace gpipe {
namespace {

using namespace ::gpipe::testing;  // NOLINT: the layer-test helpers

// `host` (a CPU tensor) copied onto `device`.
Tensor OnDevice(Device& device, const Tensor& host) {
  auto copy = Tensor::Empty(device, host.shape(), DType::kF32, MemoryKind::kData);
  EXPECT_TRUE(copy.ok());
  EXPECT_TRUE(device.CopyFromHost(host.f32(), host.bytes(), *copy).ok());
  return *std::move(copy);
}

std::vector<float> ToHost(Device& device, const Tensor& tensor) {
  std::vector<float> values(tensor.num_elements());
  EXPECT_TRUE(device.CopyToHost(tensor, values.data(), tensor.bytes()).ok());
  return values;
}

void ExpectClose(const std::vector<float>& gpu, const std::vector<float>& cpu) {
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i) {
    EXPECT_NEAR(gpu[i], cpu[i], 1e-5 * std::max(1.0f, std::abs(cpu[i]))) << i;
  }
}

TEST(ScaledTanhCudaTest, MatchesTheCpuKernel) {
  if (VisibleGpuCount() == 0) GTEST_SKIP() << "no GPU visible to this process";
  auto gpu = CreateCudaDevice(CudaDeviceOptions{.ordinal = 0});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  CpuDevice cpu;
  pb::Layer spec;
  spec.set_name("act");
  spec.mutable_custom()->set_type("scaled_tanh");
  (*spec.mutable_custom()->mutable_numbers())["scale"] = 0.75;
  const Shape input{3, 37};
  auto on_cpu = gpipe_example::ScaledTanh::Create(LayerArgs(spec, input));
  auto on_gpu = gpipe_example::ScaledTanhCudaFactory()(LayerArgs(spec, input));
  ASSERT_TRUE(on_cpu.ok() && on_gpu.ok());

  const Tensor x = UniformTensor(cpu, Shape{5, 3, 37}, 3, -2.0f, 2.0f);
  const Tensor dy = UniformTensor(cpu, Shape{5, 3, 37}, 4, -1.0f, 1.0f);
  const std::vector<Tensor> params = UniformParams(**on_cpu, cpu, 5, -1.5f, 1.5f);
  std::vector<Tensor> grads = ZeroGrads(**on_cpu, cpu);
  const Tensor x_gpu = OnDevice(**gpu, x);
  const Tensor dy_gpu = OnDevice(**gpu, dy);
  const std::vector<Tensor> params_gpu = {OnDevice(**gpu, params[0])};
  std::vector<Tensor> grads_gpu = {OnDevice(**gpu, grads[0])};

  LayerContext cpu_ctx{.device = cpu};
  LayerContext gpu_ctx{.device = **gpu};
  SavedTensors cpu_saved;
  SavedTensors gpu_saved;
  auto y = (*on_cpu)->Forward(cpu_ctx, params, x, cpu_saved);
  auto y_gpu = (*on_gpu)->Forward(gpu_ctx, params_gpu, x_gpu, gpu_saved);
  ASSERT_TRUE(y.ok() && y_gpu.ok()) << y_gpu.status();
  ExpectClose(ToHost(**gpu, *y_gpu), Values(*y));

  auto dx = (*on_cpu)->Backward(cpu_ctx, params, grads, cpu_saved, dy);
  auto dx_gpu = (*on_gpu)->Backward(gpu_ctx, params_gpu, grads_gpu, gpu_saved, dy_gpu);
  ASSERT_TRUE(dx.ok() && dx_gpu.ok()) << dx_gpu.status();
  ExpectClose(ToHost(**gpu, *dx_gpu), Values(*dx));
  ExpectClose(ToHost(**gpu, grads_gpu[0]), Values(grads[0]));
}

}  // namespace
}  // namespace gpipe
