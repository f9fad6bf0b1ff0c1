// skip_add and skip_concat: the joins of skip connections. Their outputs and both input
// gradients against values computed here element by element, finite differences of
// J = sum(y * r) with respect to both inputs, the shape and axis rules, a join built without
// its skip shape (inside a residual), the direct Forward/Backward refusal, and FindSkipEdges.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "layers/skip_edges.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/layers/make_layer.h"
#include "tests/layers/test_tensors.h"

namespace gpipe::testing {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Layer> MakeJoin(const std::string& text, const Shape& input, const Shape& skip) {
  auto layer = LayerRegistry::WithBuiltins().Create(ParseLayer(text), input, &skip);
  EXPECT_TRUE(layer.ok()) << layer.status();
  return layer.ok() ? *std::move(layer) : nullptr;
}

LayerContext Ctx(CpuDevice& device) { return LayerContext{.device = device}; }

// J = sum(y * r), in double.
double Objective(const Layer& layer, CpuDevice& device, const Tensor& x, const Tensor& s,
                 const std::vector<float>& r) {
  SavedTensors saved;
  auto y = layer.skip_join()->ForwardJoin(Ctx(device), x, s, saved);
  EXPECT_TRUE(y.ok()) << y.status();
  const std::vector<float> values = Values(*y);
  double j = 0;
  for (size_t i = 0; i < values.size(); ++i) j += double{values[i]} * r[i];
  return j;
}

// Central differences of J with respect to every element of x and of s against BackwardJoin.
void ExpectFiniteDifferences(const Layer& layer, const Shape& x_shape, const Shape& s_shape) {
  CpuDevice device;
  const Tensor x = UniformTensor(device, x_shape, 1, -1, 1);
  const Tensor s = UniformTensor(device, s_shape, 2, -1, 1);
  SavedTensors saved;
  auto y = layer.skip_join()->ForwardJoin(Ctx(device), x, s, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  const Tensor r_tensor = UniformTensor(device, y->shape(), 3, -1, 1);
  const std::vector<float> r = Values(r_tensor);
  auto grads = layer.skip_join()->BackwardJoin(Ctx(device), saved, r_tensor);
  ASSERT_TRUE(grads.ok()) << grads.status();
  const double h = 1e-2;
  for (const bool wrt_skip : {false, true}) {
    const Tensor& base = wrt_skip ? s : x;
    const std::vector<float> analytic = Values(wrt_skip ? grads->dskip : grads->dx);
    std::vector<float> values = Values(base);
    ASSERT_EQ(analytic.size(), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      auto at = [&](float delta) {
        std::vector<float> moved = values;
        moved[i] += delta;
        const Tensor t = F32Tensor(device, base.shape(), moved);
        return wrt_skip ? Objective(layer, device, x, t, r) : Objective(layer, device, t, s, r);
      };
      const double numeric = (at(h) - at(-h)) / (2 * h);
      EXPECT_NEAR(analytic[i], numeric, 2e-3 * std::max(1.0, std::abs(numeric)))
          << (wrt_skip ? "dskip" : "dx") << "[" << i << "]";
    }
  }
}

TEST(SkipAddTest, AddsTheSkipAndPassesTheGradientToBoth) {
  CpuDevice device;
  const Shape sample{2, 3};
  auto layer = MakeJoin("name: 'up' skip_add { from: 'down' }", sample, sample);
  ASSERT_NE(layer, nullptr);
  EXPECT_EQ(layer->type(), "skip_add");
  EXPECT_EQ(layer->output_shape(), sample);
  EXPECT_EQ(layer->skip_join()->skip_from(), "down");
  EXPECT_TRUE(layer->parameter_specs().empty());
  const Tensor x = UniformTensor(device, sample.WithBatch(4), 5, -2, 2);
  const Tensor s = UniformTensor(device, sample.WithBatch(4), 6, -2, 2);
  SavedTensors saved;
  auto y = layer->skip_join()->ForwardJoin(Ctx(device), x, s, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  const std::vector<float> xs = Values(x), ss = Values(s), ys = Values(*y);
  for (size_t i = 0; i < ys.size(); ++i) EXPECT_EQ(ys[i], xs[i] + ss[i]) << i;
  const Tensor dy = UniformTensor(device, sample.WithBatch(4), 7, -1, 1);
  auto grads = layer->skip_join()->BackwardJoin(Ctx(device), saved, dy);
  ASSERT_TRUE(grads.ok()) << grads.status();
  EXPECT_EQ(Values(grads->dx), Values(dy));
  EXPECT_FALSE(grads->dx.SharesStorageWith(dy));  // a layer below may keep it
  EXPECT_EQ(Values(grads->dskip), Values(dy));
  ExpectFiniteDifferences(*layer, sample.WithBatch(3), sample.WithBatch(3));
}

TEST(SkipConcatTest, ConcatenatesChannelsOfImagesSampleBySample) {
  CpuDevice device;
  auto layer = MakeJoin("name: 'up' skip_concat { from: 'down' }", Shape{2, 3, 3}, Shape{1, 3, 3});
  ASSERT_NE(layer, nullptr);
  EXPECT_EQ(layer->output_shape(), (Shape{3, 3, 3}));
  const int64_t batch = 2;
  const Tensor x = UniformTensor(device, Shape{batch, 2, 3, 3}, 8, -1, 1);
  const Tensor s = UniformTensor(device, Shape{batch, 1, 3, 3}, 9, -1, 1);
  SavedTensors saved;
  auto y = layer->skip_join()->ForwardJoin(Ctx(device), x, s, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  const std::vector<float> xs = Values(x), ss = Values(s), ys = Values(*y);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t p = 0; p < 9; ++p) {
        const float expected = c < 2 ? xs[(b * 2 + c) * 9 + p] : ss[(b * 1 + (c - 2)) * 9 + p];
        EXPECT_EQ(ys[(b * 3 + c) * 9 + p], expected) << b << " " << c << " " << p;
      }
    }
  }
  const Tensor dy = UniformTensor(device, Shape{batch, 3, 3, 3}, 10, -1, 1);
  auto grads = layer->skip_join()->BackwardJoin(Ctx(device), saved, dy);
  ASSERT_TRUE(grads.ok()) << grads.status();
  const std::vector<float> dys = Values(dy), dxs = Values(grads->dx), dss = Values(grads->dskip);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t p = 0; p < 18; ++p) EXPECT_EQ(dxs[b * 18 + p], dys[b * 27 + p]);
    for (int64_t p = 0; p < 9; ++p) EXPECT_EQ(dss[b * 9 + p], dys[b * 27 + 18 + p]);
  }
  ExpectFiniteDifferences(*layer, Shape{2, 2, 3, 3}, Shape{2, 1, 3, 3});
}

TEST(SkipConcatTest, ConcatenatesTheLastDimensionOfSequences) {
  CpuDevice device;
  auto layer =
      MakeJoin("name: 'up' skip_concat { from: 'down' axis: -1 }", Shape{4, 3}, Shape{4, 2});
  ASSERT_NE(layer, nullptr);
  EXPECT_EQ(layer->output_shape(), (Shape{4, 5}));
  const Tensor x = UniformTensor(device, Shape{2, 4, 3}, 11, -1, 1);
  const Tensor s = UniformTensor(device, Shape{2, 4, 2}, 12, -1, 1);
  SavedTensors saved;
  auto y = layer->skip_join()->ForwardJoin(Ctx(device), x, s, saved);
  ASSERT_TRUE(y.ok()) << y.status();
  const std::vector<float> xs = Values(x), ss = Values(s), ys = Values(*y);
  for (int64_t row = 0; row < 8; ++row) {
    for (int64_t f = 0; f < 5; ++f) {
      EXPECT_EQ(ys[row * 5 + f], f < 3 ? xs[row * 3 + f] : ss[row * 2 + f - 3]) << row << " " << f;
    }
  }
  ExpectFiniteDifferences(*layer, Shape{2, 4, 3}, Shape{2, 4, 2});
}

TEST(SkipJoinTest, ShapeAndAxisRulesAreExplained) {
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  const Shape a{4}, b{5};
  auto add = registry.Create(ParseLayer("name: 'j' skip_add { from: 'p' }"), a, &b);
  ASSERT_FALSE(add.ok());
  EXPECT_THAT(add.status().message(), HasSubstr("the shapes must be equal"));
  const Shape img{2, 4, 4}, other{2, 3, 4};
  auto concat = registry.Create(ParseLayer("name: 'j' skip_concat { from: 'p' }"), img, &other);
  ASSERT_FALSE(concat.ok());
  EXPECT_THAT(concat.status().message(), HasSubstr("every other dimension must be equal"));
  auto axis = registry.Create(ParseLayer("name: 'j' skip_concat { from: 'p' axis: 3 }"), img, &img);
  ASSERT_FALSE(axis.ok());
  EXPECT_THAT(axis.status().message(), HasSubstr("axis 3 is outside"));
  auto inner = registry.Create(
      ParseLayer("name: 'r' residual { layers { name: 'j' skip_add { from: 'p' } } }"), a);
  ASSERT_FALSE(inner.ok());
  EXPECT_THAT(inner.status().message(), HasSubstr("not inside a residual"));
}

TEST(SkipJoinTest, ForwardKeepsNothingAndAllocatesOnlyTheOutput) {
  for (const auto& [text, skip] : std::vector<std::pair<std::string, Shape>>{
           {"name: 'up' skip_add { from: 'down' }", Shape{2, 3}},
           {"name: 'up' skip_concat { from: 'down' axis: -1 }", Shape{2, 5}}}) {
    SCOPED_TRACE(text);
    CpuDevice device;
    auto layer = MakeJoin(text, Shape{2, 3}, skip);
    ASSERT_NE(layer, nullptr);
    EXPECT_TRUE(layer->SavedPerSample().empty());
    const Tensor x = UniformTensor(device, Shape{4, 2, 3}, 1, -1, 1);
    const Tensor s = UniformTensor(device, skip.WithBatch(4), 2, -1, 1);
    const int64_t before = device.memory().current(MemoryKind::kActivation);
    SavedTensors saved;
    auto y = layer->skip_join()->ForwardJoin(Ctx(device), x, s, saved);
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_TRUE(saved.tensors.empty());
    EXPECT_EQ(device.memory().current(MemoryKind::kActivation) - before, y->bytes());
  }
}

TEST(SkipJoinTest, ForwardAndBackwardAloneAreRefused) {
  CpuDevice device;
  auto layer = MakeJoin("name: 'up' skip_add { from: 'down' }", Shape{3}, Shape{3});
  ASSERT_NE(layer, nullptr);
  SavedTensors saved;
  const Tensor x = UniformTensor(device, Shape{2, 3}, 1, -1, 1);
  auto y = layer->Forward(Ctx(device), {}, x, saved);
  EXPECT_EQ(y.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(y.status().message(), HasSubstr("joins the output of 'down'"));
  std::vector<Tensor> no_grads;
  auto dx = layer->Backward(Ctx(device), {}, no_grads, saved, x);
  EXPECT_EQ(dx.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(dx.status().message(), HasSubstr("calls ForwardJoin and BackwardJoin"));
}

pb::Model ParseModel(const std::string& text) {
  pb::Model model;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &model)) << text;
  return model;
}

TEST(SkipEdgesTest, FindsEachJoinsProducerAndRefusesBadNames) {
  const pb::Model model = ParseModel(
      "layers { name: 'a' relu {} } layers { name: 'b' relu {} }"
      "layers { name: 'c' skip_add { from: 'a' } } layers { name: 'd' skip_concat { from: 'c' } }"
      "layers { name: 'e' skip_add { from: 'a' } }");
  auto edges = FindSkipEdges(model);
  ASSERT_TRUE(edges.ok()) << edges.status();
  ASSERT_EQ(edges->size(), 3u);
  EXPECT_EQ((*edges)[0].producer, 0);
  EXPECT_EQ((*edges)[0].join, 2);
  EXPECT_EQ((*edges)[1].producer, 2);
  EXPECT_EQ((*edges)[1].join, 3);
  EXPECT_EQ((*edges)[2].producer, 0);
  EXPECT_EQ((*edges)[2].join, 4);
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"layers { name: 'a' skip_add { } }", "has no `from`"},
           {"layers { name: 'a' relu {} } layers { name: 'b' skip_add { from: 'z' } }",
            "from 'z' names no layer"},
           {"layers { name: 'a' skip_add { from: 'a' } }", "the layer itself"},
           {"layers { name: 'a' skip_add { from: 'b' } } layers { name: 'b' relu {} }",
            "a later layer"}}) {
    auto bad = FindSkipEdges(ParseModel(text));
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_THAT(bad.status().message(), HasSubstr(message)) << text;
  }
}

}  // namespace
}  // namespace gpipe::testing
