// Against values computed independently of gpipe: PyTorch trained the same MLP from the same
// initial weights on the same data (tests/e2e/oracles/torch_reference.py wrote the fixtures).
// gpipe, loading those weights by their PyTorch names, must end where PyTorch ended — on one
// stage and on a pipeline, with the mini-batch whole or split into micro-batches.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/ckpt/safetensors.h"
#include "tests/support/process_runner.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

constexpr char kDir[] = "tests/e2e/testdata/torch_reference";

std::map<std::string, NamedTensorData> ReadWeights(const std::string& path) {
  std::map<std::string, NamedTensorData> weights;
  auto read = ReadSafetensors(path);
  EXPECT_TRUE(read.ok()) << read.status();
  if (read.ok()) {
    for (NamedTensorData& t : *read) weights[t.name] = std::move(t);
  }
  return weights;
}

struct Case {
  int stages;
  int micro_batches;
};

void ExpectMatchesTorch(const std::string& optimizer_override, const std::string& reference) {
  const std::map<std::string, NamedTensorData> torch =
      ReadWeights(testing::SourcePath(absl::StrCat(kDir, "/", reference)));
  const std::map<std::string, NamedTensorData> initial =
      ReadWeights(testing::SourcePath(absl::StrCat(kDir, "/init.safetensors")));
  ASSERT_EQ(torch.size(), 9u);
  for (const Case c : {Case{1, 1}, Case{2, 4}, Case{4, 8}}) {
    SCOPED_TRACE(absl::StrCat(c.stages, " stages, ", c.micro_batches, " micro-batches"));
    const std::string out =
        absl::StrCat(::gpipe::testing::ProcessScratchDir(), "/torch_ref_", reference, "_", c.stages,
                     "_", c.micro_batches, ".safetensors");
    std::vector<std::string> argv = testing::MpirunPrefix(c.stages);
    argv.insert(argv.end(), {testing::BinPath("gpipe-worker"), "--plan",
                             testing::SourcePath(absl::StrCat(kDir, "/plan.pbtxt")), "--init-from",
                             testing::SourcePath(absl::StrCat(kDir, "/init.safetensors")),
                             "--export", out, "--override",
                             absl::StrCat("pipeline { stages: ", c.stages,
                                          " micro_batches: ", c.micro_batches, " }"),
                             "--override", optimizer_override});
    const testing::ProcessResult run = testing::RunProcess(argv, 120);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const std::map<std::string, NamedTensorData> ours = ReadWeights(out);
    ASSERT_EQ(ours.size(), torch.size());
    for (const auto& [name, expected] : torch) {
      ASSERT_TRUE(ours.contains(name)) << name;
      const NamedTensorData& got = ours.at(name);
      ASSERT_EQ(got.shape, expected.shape) << name;
      double max_diff = 0, max_ref = 0, max_moved = 0;
      for (size_t i = 0; i < expected.values.size(); ++i) {
        max_diff = std::max(max_diff, std::abs(double{got.values[i]} - expected.values[i]));
        max_ref = std::max(max_ref, std::abs(double{expected.values[i]}));
        max_moved =
            std::max(max_moved, std::abs(double{expected.values[i]} - initial.at(name).values[i]));
      }
      EXPECT_LE(max_diff, 1e-5 * max_ref) << name << ": max |gpipe - torch| = " << max_diff;
      // Training moved every tensor far more than the tolerance, so the match is not trivial.
      EXPECT_GT(max_moved, 100 * 1e-5 * max_ref) << name;
    }
  }
}

TEST(TorchReferenceTest, SgdWithNesterovMomentumAndWeightDecayMatchesPyTorch) {
  ExpectMatchesTorch("training { steps: 5 }", "sgd_final.safetensors");
}

TEST(TorchReferenceTest, AdamWMatchesPyTorch) {
  ExpectMatchesTorch("training { optimizer { adamw { lr: 0.01 weight_decay: 0.1 } } }",
                     "adamw_final.safetensors");
}

}  // namespace
}  // namespace gpipe
