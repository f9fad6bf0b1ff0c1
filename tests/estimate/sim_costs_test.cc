// SimCosts: each source of a layer's times (layer_costs, profile, FLOPs at peak), their
// precedence, the profile's micro-batch scaling, the link and all-reduce model, and the
// profile file's validation.
#include "runtime/estimate/sim_costs.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

pb::Sim ParseSim(const std::string& text) {
  pb::Sim sim;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &sim)) << text;
  return sim;
}

std::string WriteProfile(const std::string& name, const std::string& json) {
  const std::string path = absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/", name);
  std::ofstream(path) << json;
  return path;
}

constexpr char kProfile[] = R"({"device": "cpu", "micro_batch": 16, "layers": [
  {"name": "fc1", "forward_us": 100, "backward_input_us": 80, "backward_weight_us": 60},
  {"name": "fc2", "forward_us": 40, "backward_input_us": 20, "backward_weight_us": 10}]})";

TEST(SimCostsTest, FlopsAtPeakCostEachHalfOfTheBackwardAsMuchAsTheForward) {
  absl::StatusOr<SimCosts> costs = SimCosts::Create(ParseSim("peak_gflops: 100"), 4);
  ASSERT_TRUE(costs.ok()) << costs.status();
  // 2.5e9 FLOPs per sample x 4 samples at 1e11 FLOP/s = 100 ms.
  const SimOpTimes t = costs->ForLayer("fc", 2.5e9);
  EXPECT_EQ(t.source, SimCostSource::kFlops);
  EXPECT_EQ(t.forward, absl::Milliseconds(100));
  EXPECT_EQ(t.backward_input, absl::Milliseconds(100));
  EXPECT_EQ(t.backward_weight, absl::Milliseconds(100));
}

TEST(SimCostsTest, LayerCostsComeFirstThenTheProfileThenFlops) {
  const std::string profile = WriteProfile("precedence.json", kProfile);
  absl::StatusOr<SimCosts> costs = SimCosts::Create(
      ParseSim(absl::StrCat("profile: '", profile,
                            "' peak_gflops: 1 "
                            "layer_costs { layer: 'fc1' forward_us: 7 backward_input_us: 8 "
                            "backward_weight_us: 9 } "
                            "layer_costs { layer: 'fc1' forward_us: 1000 }")),
      16);
  ASSERT_TRUE(costs.ok()) << costs.status();
  const SimOpTimes fc1 = costs->ForLayer("fc1", 1e9);
  EXPECT_EQ(fc1.source, SimCostSource::kLayerCosts);
  EXPECT_EQ(fc1.forward, absl::Microseconds(7));  // the first entry naming the layer
  EXPECT_EQ(fc1.backward_input, absl::Microseconds(8));
  EXPECT_EQ(fc1.backward_weight, absl::Microseconds(9));
  const SimOpTimes fc2 = costs->ForLayer("fc2", 1e9);
  EXPECT_EQ(fc2.source, SimCostSource::kProfile);
  EXPECT_EQ(fc2.forward, absl::Microseconds(40));
  EXPECT_EQ(fc2.backward_input, absl::Microseconds(20));
  EXPECT_EQ(fc2.backward_weight, absl::Microseconds(10));
  // In no table: 1e6 FLOPs x 16 samples at 1 GFLOP/s = 16 ms.
  const SimOpTimes head = costs->ForLayer("head", 1e6);
  EXPECT_EQ(head.source, SimCostSource::kFlops);
  EXPECT_EQ(head.forward, absl::Milliseconds(16));
}

TEST(SimCostsTest, ProfileTimesScaleWithTheMicroBatchSize) {
  const std::string profile = WriteProfile("scaling.json", kProfile);
  absl::StatusOr<SimCosts> costs =
      SimCosts::Create(ParseSim(absl::StrCat("profile: '", profile, "'")), 4);
  ASSERT_TRUE(costs.ok()) << costs.status();
  const SimOpTimes fc1 = costs->ForLayer("fc1", 0);
  EXPECT_EQ(fc1.forward, absl::Microseconds(25));  // 100us x 4/16
  EXPECT_EQ(fc1.backward_input, absl::Microseconds(20));
  EXPECT_EQ(fc1.backward_weight, absl::Microseconds(15));
}

TEST(SimCostsTest, LinkAndAllReduceFollowLatencyAndBandwidth) {
  absl::StatusOr<SimCosts> costs =
      SimCosts::Create(ParseSim("link_latency_us: 10 link_gbps: 2 loss_us: 3 optimizer_us: 4"), 1);
  ASSERT_TRUE(costs.ok()) << costs.status();
  // 10us + 2e6 bytes / 2e9 B/s = 10us + 1ms.
  EXPECT_EQ(costs->Transfer(2'000'000), absl::Microseconds(1010));
  EXPECT_EQ(costs->Transfer(0), absl::Microseconds(10));
  EXPECT_EQ(costs->AllReduce(8'000'000, 1), absl::ZeroDuration());
  // 4 ranks: 6 steps of (10us + 2e6 / 2e9 s).
  EXPECT_EQ(costs->AllReduce(8'000'000, 4), 6 * absl::Microseconds(1010));
  EXPECT_EQ(costs->loss(), absl::Microseconds(3));
  EXPECT_EQ(costs->optimizer(), absl::Microseconds(4));
}

TEST(SimCostsTest, RejectsImpossibleSettings) {
  EXPECT_FALSE(SimCosts::Create(ParseSim("peak_gflops: 0"), 1).ok());
  EXPECT_FALSE(SimCosts::Create(ParseSim("link_gbps: -1"), 1).ok());
  EXPECT_FALSE(SimCosts::Create(ParseSim("link_latency_us: -1"), 1).ok());
  EXPECT_FALSE(SimCosts::Create(ParseSim("layer_costs { layer: 'a' forward_us: -2 }"), 1).ok());
  EXPECT_FALSE(SimCosts::Create(ParseSim(""), 0).ok());
}

TEST(SimProfileTest, ParsesTheProfilersFormat) {
  absl::StatusOr<SimProfile> profile = ParseSimProfile(kProfile, "p.json");
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->device, "cpu");
  EXPECT_EQ(profile->micro_batch, 16);
  ASSERT_EQ(profile->layers.size(), 2u);
  EXPECT_EQ(profile->layers.at("fc1").backward_weight, 60);
}

TEST(SimProfileTest, NamesWhatIsWrong) {
  struct Case {
    std::string json, message;
  };
  const Case cases[] = {
      {"{", "sim profile p.json: the profile is not valid JSON (line 1, column 2)"},
      {R"({"micro_batch": 2, "micro_batch": 3, "layers": []})", "duplicate object key"},
      {R"({"micro_batch": 1e999, "layers": []})", "number overflow"},
      {R"({"micro_batch": 2.0, "layers": []})", "micro_batch must be an integer >= 1"},
      {R"({"layers": []})", "micro_batch must be an integer >= 1"},
      {R"({"micro_batch": 0, "layers": []})", "micro_batch must be an integer >= 1"},
      {R"({"micro_batch": 2})", "layers must be an array"},
      {R"({"micro_batch": 2, "layers": [{"forward_us": 1}]})", "layers[0].name"},
      {R"({"micro_batch": 2, "layers": [{"name": "a", "forward_us": -1,
          "backward_input_us": 1, "backward_weight_us": 1}]})",
       "layers[0].forward_us must be a number >= 0"},
      {R"({"micro_batch": 2, "layers": [{"name": "a", "forward_us": 1,
          "backward_input_us": 1}]})",
       "layers[0].backward_weight_us"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<SimProfile> profile = ParseSimProfile(c.json, "p.json");
    ASSERT_FALSE(profile.ok()) << c.json;
    EXPECT_NE(profile.status().message().find(c.message), std::string::npos)
        << profile.status().message();
  }
  const absl::StatusOr<SimProfile> missing = LoadSimProfile("/nonexistent/profile.json");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/profile.json"), std::string::npos);
}

}  // namespace
}  // namespace gpipe
