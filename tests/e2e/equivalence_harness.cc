#include "tests/e2e/equivalence_harness.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/support/process_runner.h"
#include "tests/support/scratch_dir.h"

namespace gpipe::testing {

Weights EquivalenceHarness::TrainOn(const std::string& device_override, int stages,
                                    const std::vector<std::string>& overrides,
                                    const std::string& plan, int replicas) {
  const std::string out = absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/equivalence_",
                                       counter_++, ".safetensors");
  std::vector<std::string> argv = MpirunPrefix(stages * replicas);
  argv.insert(argv.end(),
              {BinPath("gpipe-worker"), "--plan", SourcePath(plan), "--export", out, "--override",
               absl::StrCat("pipeline { stages: ", stages, " data_parallel: ", replicas, " }")});
  if (!device_override.empty()) argv.insert(argv.end(), {"--override", device_override});
  for (const std::string& o : overrides) argv.insert(argv.end(), {"--override", o});
  const ProcessResult run = RunProcess(argv, 120);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_FALSE(run.timed_out);
  Weights weights;
  auto read = ReadSafetensors(out);
  EXPECT_TRUE(read.ok()) << read.status() << "\n" << run.output;
  if (read.ok()) {
    for (NamedTensorData& t : *read) weights[t.name] = std::move(t);
  }
  return weights;
}

void EquivalenceHarness::ExpectBitIdentical(const Weights& a, const Weights& b) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (const auto& [name, tensor] : a) {
    ASSERT_TRUE(b.contains(name)) << name;
    const NamedTensorData& other = b.at(name);
    ASSERT_EQ(tensor.shape, other.shape) << name;
    for (size_t i = 0; i < tensor.values.size(); ++i) {
      ASSERT_EQ(tensor.values[i], other.values[i]) << name << "[" << i << "]";
    }
  }
}

void EquivalenceHarness::ExpectClose(const Weights& a, const Weights& b, double relative) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (const auto& [name, tensor] : a) {
    ASSERT_TRUE(b.contains(name)) << name;
    const NamedTensorData& other = b.at(name);
    ASSERT_EQ(tensor.shape, other.shape) << name;
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < tensor.values.size(); ++i) {
      max_diff = std::max(max_diff, std::abs(double{tensor.values[i]} - other.values[i]));
      max_ref = std::max(max_ref, std::abs(double{other.values[i]}));
    }
    EXPECT_LE(max_diff, relative * max_ref) << name << ": max diff " << max_diff;
  }
}

double EquivalenceHarness::MaxRelativeDifference(const Weights& a, const Weights& b) {
  double worst = 0;
  for (const auto& [name, tensor] : a) {
    if (!b.contains(name)) return INFINITY;
    const NamedTensorData& other = b.at(name);
    if (other.values.size() != tensor.values.size()) return INFINITY;
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < tensor.values.size(); ++i) {
      max_diff = std::max(max_diff, std::abs(double{tensor.values[i]} - other.values[i]));
      max_ref = std::max(max_ref, std::abs(double{other.values[i]}));
    }
    worst = std::max(worst, max_ref > 0 ? max_diff / max_ref : max_diff);
  }
  return worst;
}

Weights EquivalenceHarness::ReadWeights(const std::string& path) {
  Weights weights;
  absl::StatusOr<std::vector<NamedTensorData>> read = ReadSafetensors(path);
  EXPECT_TRUE(read.ok()) << read.status();
  if (read.ok()) {
    for (NamedTensorData& t : *read) weights[t.name] = std::move(t);
  }
  return weights;
}

Weights EquivalenceHarness::ParametersOnly(const Weights& weights) {
  Weights parameters;
  for (const auto& [name, tensor] : weights) {
    if (!absl::StrContains(name, ".running_")) parameters[name] = tensor;
  }
  return parameters;
}

bool EquivalenceHarness::Differs(const Weights& a, const Weights& b) {
  for (const auto& [name, tensor] : a) {
    if (tensor.values != b.at(name).values) return true;
  }
  return false;
}

}  // namespace gpipe::testing
