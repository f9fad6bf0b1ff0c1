// The equivalence tests' harness: trains tests/e2e/testdata/equivalence.pbtxt (or another plan)
// under mpirun on K ranks with --override's, exports the weights, and compares weight sets
// exactly or within a relative tolerance. The device is a parameter of the fixture, so the
// same comparisons run on the CPU (equivalence_test.cc) and on a GPU
// (cuda_equivalence_test.cc).
#ifndef GPIPE_TESTS_E2E_EQUIVALENCE_HARNESS_H_
#define GPIPE_TESTS_E2E_EQUIVALENCE_HARNESS_H_

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/ckpt/safetensors.h"

namespace gpipe::testing {

using Weights = std::map<std::string, NamedTensorData>;

inline constexpr char kEquivalencePlan[] = "tests/e2e/testdata/equivalence.pbtxt";
// The runtime override that puts a plan on the CUDA device, every rank on the one GPU.
inline constexpr char kOnSharedGpu[] = "runtime { device: CUDA cuda { share_gpu: true } }";

class EquivalenceHarness : public ::testing::Test {
 protected:
  // Trains `plan` with `overrides` on `stages` ranks on the fixture's device and returns the
  // exported weights (empty, with a failed expectation, when the run fails).
  Weights Train(int stages, const std::vector<std::string>& overrides,
                const std::string& plan = kEquivalencePlan) {
    return TrainOn(device_override_, stages, overrides, plan);
  }
  // `replicas` data-parallel copies of a `stages`-stage pipeline: stages * replicas ranks.
  Weights TrainReplicated(int stages, int replicas, const std::vector<std::string>& overrides,
                          const std::string& plan = kEquivalencePlan) {
    return TrainOn(device_override_, stages, overrides, plan, replicas);
  }
  // The same on the device `device_override` selects ("": the plan's own, CPU).
  Weights TrainOn(const std::string& device_override, int stages,
                  const std::vector<std::string>& overrides,
                  const std::string& plan = kEquivalencePlan, int replicas = 1);

  static void ExpectBitIdentical(const Weights& a, const Weights& b);
  // max |a - b| <= relative * max |b|, per tensor.
  static void ExpectClose(const Weights& a, const Weights& b, double relative);
  static bool Differs(const Weights& a, const Weights& b);
  // The largest, over tensors, of max |a - b| / max |b| (what ExpectClose bounds).
  static double MaxRelativeDifference(const Weights& a, const Weights& b);
  // The weights without layer buffers (batch norm's running_mean and running_var).
  static Weights ParametersOnly(const Weights& weights);
  // The tensors of a safetensors file (an export), by name; empty, with a failed expectation,
  // when it cannot be read.
  static Weights ReadWeights(const std::string& path);

  // An --override applied before the test's own ("": the plan's device).
  std::string device_override_;

 private:
  int counter_ = 0;
};

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_E2E_EQUIVALENCE_HARNESS_H_
