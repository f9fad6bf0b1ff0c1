// The layer profiler: the profile JSON of a plan parses back with the project's strict ParseJson,
// lists every top-level layer in model order with positive times, reports weight halves only for
// layers that split their backward, and profiles id-reading layers on valid ids.
#include "runtime/estimate/layer_profiler.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/core/json.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/plan/plan_loader.h"

namespace gpipe {
namespace {

constexpr char kMlpPlan[] = R"pb(
  name: "profiled-mlp"
  model {
    input { shape: [ 12 ] }
    layers {
      name: "fc1"
      linear { out_features: 16 }
    }
    layers {
      name: "act1"
      relu {}
    }
    layers {
      name: "fc2"
      linear { out_features: 3 }
    }
    loss { softmax_cross_entropy {} }
  }
  pipeline { stages: 1 micro_batches: 4 }
  training {
    global_batch: 24
    steps: 1
    optimizer { sgd { lr: 0.1 } }
  }
  data { synthetic {} }
)pb";

std::vector<std::string> Keys(const Json& object) {
  std::vector<std::string> keys;
  for (const auto& [key, unused] : object.items()) keys.push_back(key);
  return keys;
}

pb::Plan ParseOrDie(const std::string& text) {
  absl::StatusOr<LoadedPlan> loaded = ParsePlanText(text, "test.pbtxt", ".", {});
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? loaded->plan : pb::Plan();
}

TEST(LayerProfilerTest, MlpProfileParsesBackWithLayersInOrderAndPositiveTimes) {
  CpuDevice device;
  const ProfileOptions options{.repeats = 3, .warmup = 1};
  absl::StatusOr<std::string> json =
      ProfilePlanLayers(ParseOrDie(kMlpPlan), LayerRegistry::WithBuiltins(), device, options);
  ASSERT_TRUE(json.ok()) << json.status();

  absl::StatusOr<Json> profile = ParseJson(*json, "the profile");
  ASSERT_TRUE(profile.ok()) << profile.status() << "\n" << *json;
  ASSERT_TRUE(profile->is_object());
  EXPECT_EQ(Keys(*profile),
            (std::vector<std::string>{"device", "threads", "micro_batch", "repeats", "layers"}));
  EXPECT_EQ(profile->at("device").get<std::string>(), "cpu");
  EXPECT_EQ(profile->at("threads").get<int64_t>(), 1);
  EXPECT_EQ(profile->at("micro_batch").get<int64_t>(), 6);  // 24 samples / 4 micro-batches
  EXPECT_EQ(profile->at("repeats").get<int64_t>(), 3);

  const Json& layers = profile->at("layers");
  ASSERT_TRUE(layers.is_array());
  const std::vector<std::string> names = {"fc1", "act1", "fc2"};
  ASSERT_EQ(layers.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const Json& layer = layers[i];
    SCOPED_TRACE(names[i]);
    EXPECT_EQ(Keys(layer), (std::vector<std::string>{"name", "forward_us", "backward_input_us",
                                                     "backward_weight_us"}));
    EXPECT_EQ(layer.at("name").get<std::string>(), names[i]);
    EXPECT_GT(layer.at("forward_us").get<double>(), 0.0);
    EXPECT_GT(layer.at("backward_input_us").get<double>(), 0.0);
    // Linear splits its backward; relu has no weights and runs its backward whole in B.
    if (names[i] == "act1") {
      EXPECT_EQ(layer.at("backward_weight_us").get<double>(), 0.0);
    } else {
      EXPECT_GT(layer.at("backward_weight_us").get<double>(), 0.0);
    }
  }
}

TEST(LayerProfilerTest, EmbeddingIsProfiledOnValidIds) {
  CpuDevice device;
  pb::Layer spec;
  spec.set_name("embed");
  spec.mutable_embedding()->set_num_embeddings(5);
  spec.mutable_embedding()->set_embedding_dim(4);
  absl::StatusOr<std::unique_ptr<Layer>> layer =
      LayerRegistry::WithBuiltins().Create(spec, Shape{7});
  ASSERT_TRUE(layer.ok()) << layer.status();
  ASSERT_EQ((*layer)->input_dtype(), DType::kI64);

  absl::StatusOr<LayerTiming> timing =
      ProfileLayer(**layer, device, /*batch=*/3, /*layer_index=*/0, /*need_input_grad=*/false,
                   ProfileOptions{.repeats = 1, .warmup = 0});
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_EQ(timing->name, "embed");
  EXPECT_GT(timing->forward_us, 0.0);
  EXPECT_GT(timing->backward_input_us, 0.0);
}

TEST(LayerProfilerTest, RejectsZeroRepeats) {
  CpuDevice device;
  absl::StatusOr<std::string> json = ProfilePlanLayers(
      ParseOrDie(kMlpPlan), LayerRegistry::WithBuiltins(), device, ProfileOptions{.repeats = 0});
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(json.status().message().find("layer 0 'fc1'"), std::string::npos) << json.status();
}

TEST(LayerProfilerTest, InvalidPlanFailsWithTheAnalysisError) {
  CpuDevice device;
  pb::Plan plan = ParseOrDie(kMlpPlan);
  plan.mutable_model()->mutable_layers(0)->mutable_linear()->clear_out_features();
  absl::StatusOr<std::string> json =
      ProfilePlanLayers(plan, LayerRegistry::WithBuiltins(), device, ProfileOptions{});
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(json.status().message().find("out_features"), std::string::npos) << json.status();
}

}  // namespace
}  // namespace gpipe
