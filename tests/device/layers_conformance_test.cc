// Every built-in layer and loss on every backend present, against the CPU reference backend:
// the same parameters, inputs and output gradients go to both, and outputs, input gradients,
// parameter gradients and updated buffers must agree within the case's tolerance. On the CPU
// itself this pins determinism (two devices, the same bits); a CUDA build adds its backend to
// BackendsUnderTest and runs these cases with no new test code.
#include <memory>
#include <string>
#include <vector>

#include "layers/layer.h"
#include "layers/loss.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/device/ops/loss_ops.h"
#include "tests/device/backends_under_test.h"
#include "tests/layers/make_layer.h"

namespace gpipe::testing {
namespace {

struct LayerCase {
  std::string name;  // test label
  std::string text;  // the plan's layer entry
  Shape input_shape;
  int64_t batch = 4;
  // Relative tolerance against the CPU (0 on the CPU itself: the same bits).
  double rel_tol = 1e-5;
  int64_t num_ids = 0;  // > 0: the input is i64 ids in [0, num_ids)
};

std::vector<LayerCase> LayerCases() {
  return {
      {"linear", "name: 'fc' linear { out_features: 7 }", Shape{12}},
      {"linear_no_bias", "name: 'fc' linear { out_features: 5 bias: false }", Shape{3, 6}},
      {"relu", "name: 'a' relu {}", Shape{4, 5}},
      {"tanh", "name: 'a' tanh {}", Shape{9}},
      {"gelu", "name: 'a' gelu {}", Shape{9}},
      {"dropout", "name: 'd' dropout { p: 0.25 }", Shape{16}},
      {"layer_norm", "name: 'ln' layer_norm {}", Shape{3, 10}},
      {"conv2d", "name: 'c' conv2d { out_channels: 4 kernel_size: 3 padding: 1 stride: 2 }",
       Shape{3, 9, 8}},
      {"conv2d_groups_dilation",
       "name: 'c' conv2d { out_channels: 4 kernel_size: 3 dilation: 2 groups: 2 }", Shape{4, 9, 9}},
      {"max_pool2d", "name: 'p' max_pool2d { kernel_size: 3 stride: 2 padding: 1 }",
       Shape{2, 7, 7}},
      {"avg_pool2d", "name: 'p' avg_pool2d { kernel_size: 2 }", Shape{2, 6, 6}},
      {"global_avg_pool2d", "name: 'g' global_avg_pool2d {}", Shape{3, 5, 4}},
      {"flatten", "name: 'f' flatten {}", Shape{2, 3, 4}},
      {"batch_norm2d", "name: 'bn' batch_norm2d {}", Shape{3, 4, 4}},
      {"batch_norm1d", "name: 'bn' batch_norm1d {}", Shape{6}},
      // Every backend adds the rows of a repeated id in position order: the same bits as the CPU.
      {"embedding", "name: 'e' embedding { num_embeddings: 11 embedding_dim: 5 }", Shape{6}, 4, 0.0,
       /*num_ids=*/11},
      {"embedding_one_id_everywhere", "name: 'e' embedding { num_embeddings: 11 embedding_dim: 5 }",
       Shape{6}, 4, 0.0, /*num_ids=*/1},
      {"embedding_vocabulary",
       "name: 'e' embedding { num_embeddings: 50304 embedding_dim: 24 init_std: 0.02 }", Shape{128},
       8, 0.0, /*num_ids=*/50304},
      {"positional_embedding", "name: 'p' positional_embedding { max_positions: 8 }", Shape{6, 4}},
      {"attention", "name: 'att' causal_self_attention { num_heads: 2 }", Shape{5, 8}},
      {"transformer_block", "name: 'blk' transformer_block { num_heads: 2 }", Shape{5, 8}},
      {"rms_norm", "name: 'n' rms_norm {}", Shape{3, 10}},
      {"llama_block",
       "name: 'blk' llama_block { num_heads: 4 num_kv_heads: 2 intermediate_size: 12 }",
       Shape{5, 8}},
      {"residual",
       "name: 'res' residual { layers { name: 'fc' linear { out_features: 6 } } "
       "layers { name: 'a' relu {} } }",
       Shape{6}},
  };
}

// Host values of one parameter or buffer: its init kind's constant, or test values.
std::vector<float> InitialValues(const ParamSpec& spec, uint64_t seed) {
  const int64_t n = spec.shape.num_elements();
  switch (spec.init) {
    case ParamInit::kZeros:
      return std::vector<float>(n, 0.0f);
    case ParamInit::kOnes:
      return std::vector<float>(n, 1.0f);
    default:
      return TestValues(seed, n, -0.5f, 0.5f);
  }
}

// One device's copy of a layer's state and the results of one forward and backward.
struct LayerRun {
  std::vector<Tensor> params, grads, buffers;
  std::vector<float> y, dx;
  std::vector<std::vector<float>> dparams, buffer_values;
};

LayerRun RunLayer(Device& device, const Layer& layer, const LayerCase& c, const std::vector<float>& x,
             const std::vector<int64_t>& ids, const std::vector<float>& dy) {
  LayerRun run;
  const auto upload = [&](const std::vector<float>& values, const Shape& shape) {
    Tensor t = *Tensor::Empty(device, shape, DType::kF32, MemoryKind::kActivation);
    GPIPE_CHECK(device.CopyFromHost(values.data(), t.bytes(), t).ok());
    return t;
  };
  const auto download = [&](const Tensor& t) {
    std::vector<float> values(t.num_elements());
    GPIPE_CHECK(device.CopyToHost(t, values.data(), t.bytes()).ok());
    return values;
  };
  uint64_t seed = 100;
  for (const ParamSpec& spec : layer.parameter_specs()) {
    run.params.push_back(upload(InitialValues(spec, seed++), spec.shape));
    run.grads.push_back(upload(std::vector<float>(spec.shape.num_elements(), 0.0f), spec.shape));
  }
  for (const ParamSpec& spec : layer.buffer_specs()) {
    run.buffers.push_back(upload(InitialValues(spec, seed++), spec.shape));
  }
  Tensor input;
  const Shape batched = c.input_shape.WithBatch(c.batch);
  if (c.num_ids > 0) {
    input = *Tensor::Empty(device, batched, DType::kI64, MemoryKind::kActivation);
    GPIPE_CHECK(device.CopyFromHost(ids.data(), input.bytes(), input).ok());
  } else {
    input = upload(x, batched);
  }
  LayerContext ctx{.device = device};
  ctx.seed = 5;
  ctx.step = 3;
  ctx.layer_index = 2;
  ctx.buffers = run.buffers;
  SavedTensors saved;
  auto y = layer.Forward(ctx, run.params, input, saved);
  GPIPE_CHECK(y.ok()) << y.status();
  run.y = download(*y);
  const Tensor dy_tensor = upload(dy, y->shape());
  auto dx = layer.Backward(ctx, run.params, run.grads, saved, dy_tensor);
  GPIPE_CHECK(dx.ok()) << dx.status();
  if (dx->defined()) run.dx = download(*dx);
  for (const Tensor& g : run.grads) run.dparams.push_back(download(g));
  for (const Tensor& b : run.buffers) run.buffer_values.push_back(download(b));
  return run;
}

void ExpectClose(const std::vector<float>& actual, const std::vector<float>& reference,
                 double rel_tol, const std::string& what) {
  std::vector<double> expected(reference.begin(), reference.end());
  // Absolute slack for values that cancel to near zero: relative to the reference's scale.
  double scale = 0;
  for (float v : reference) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  ExpectNear(actual, expected, rel_tol, rel_tol * scale, what);
}

class LayersConformanceTest : public OpsConformanceTest {};
GPIPE_INSTANTIATE_ON_EVERY_BACKEND(LayersConformanceTest);

TEST_P(LayersConformanceTest, EveryLayerAgreesWithTheCpuReference) {
  CpuDevice reference;
  const bool is_reference = GetParam().name == "cpu";
  for (const LayerCase& c : LayerCases()) {
    SCOPED_TRACE(c.name);
    const std::unique_ptr<Layer> layer = MakeLayer(c.text, c.input_shape);
    const std::vector<float> x = TestValues(1, c.input_shape.num_elements() * c.batch);
    std::vector<int64_t> ids(c.input_shape.num_elements() * c.batch);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = (i * 7 + 3) % std::max<int64_t>(c.num_ids, 1);
    const std::vector<float> dy = TestValues(2, layer->output_shape().num_elements() * c.batch);
    const LayerRun want = RunLayer(reference, *layer, c, x, ids, dy);
    const LayerRun got = RunLayer(device(), *layer, c, x, ids, dy);
    const double tol = is_reference ? 0.0 : c.rel_tol;
    ExpectClose(got.y, want.y, tol, c.name + " output");
    ExpectClose(got.dx, want.dx, tol, c.name + " input gradient");
    ASSERT_EQ(got.dparams.size(), want.dparams.size());
    for (size_t i = 0; i < want.dparams.size(); ++i) {
      ExpectClose(got.dparams[i], want.dparams[i], tol,
                  c.name + " gradient of " + layer->parameter_specs()[i].name);
    }
    for (size_t i = 0; i < want.buffer_values.size(); ++i) {
      ExpectClose(got.buffer_values[i], want.buffer_values[i], tol,
                  c.name + " buffer " + layer->buffer_specs()[i].name);
    }
  }
}

struct LossCase {
  std::string text;
  Shape output_shape;   // per sample
  int64_t classes = 0;  // > 0: targets are class ids
};

TEST_P(LayersConformanceTest, EveryLossAgreesWithTheCpuReference) {
  CpuDevice reference;
  const double tol = GetParam().name == "cpu" ? 0.0 : 1e-5;
  const LossCase cases[] = {{"softmax_cross_entropy {}", Shape{7}, 7},
                            {"softmax_cross_entropy {}", Shape{3, 5}, 5},
                            {"softmax_cross_entropy {}", Shape{2, 50304}, 50304},
                            {"mse {}", Shape{4}, 0}};
  for (const LossCase& c : cases) {
    SCOPED_TRACE(c.text);
    const std::unique_ptr<Loss> loss = MakeLoss(c.text);
    constexpr int64_t kBatch = 6;
    const Shape out_shape = c.output_shape.WithBatch(kBatch);
    const std::vector<float> output = TestValues(3, out_shape.num_elements(), -2, 2);
    const Shape target_shape = loss->target_shape(c.output_shape).WithBatch(kBatch);
    std::vector<int64_t> ids(target_shape.num_elements());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = (i * 5 + 1) % std::max<int64_t>(c.classes, 1);
    const std::vector<float> targets = TestValues(4, target_shape.num_elements());
    const auto run = [&](Device& device, std::vector<float>& grad, std::vector<double>& totals) {
      Tensor out = *Tensor::Empty(device, out_shape, DType::kF32, MemoryKind::kActivation);
      GPIPE_CHECK(device.CopyFromHost(output.data(), out.bytes(), out).ok());
      Tensor tgt = *Tensor::Empty(device, target_shape, loss->target_dtype(), MemoryKind::kData);
      const void* source = c.classes > 0 ? static_cast<const void*>(ids.data()) : targets.data();
      GPIPE_CHECK(device.CopyFromHost(source, tgt.bytes(), tgt).ok());
      Tensor sums =
          *Tensor::Empty(device, Shape{kLossTotalsSize}, DType::kF64, MemoryKind::kWorkspace);
      GPIPE_CHECK(device.ops().tensor.Fill(sums, 0.0).ok());
      auto g = loss->Compute(device, out, tgt, /*global_batch=*/12, sums);
      GPIPE_CHECK(g.ok()) << g.status();
      grad.resize(g->num_elements());
      GPIPE_CHECK(device.CopyToHost(*g, grad.data(), g->bytes()).ok());
      totals.resize(kLossTotalsSize);
      GPIPE_CHECK(device.CopyToHost(sums, totals.data(), sums.bytes()).ok());
    };
    std::vector<float> want_grad, got_grad;
    std::vector<double> want_totals, got_totals;
    run(reference, want_grad, want_totals);
    run(device(), got_grad, got_totals);
    ExpectClose(got_grad, want_grad, tol, "loss gradient");
    EXPECT_NEAR(got_totals[kLossSum], want_totals[kLossSum],
                tol * std::fabs(want_totals[kLossSum]));
    EXPECT_EQ(got_totals[kLossCorrect], want_totals[kLossCorrect]);
  }
}

}  // namespace
}  // namespace gpipe::testing
