// The NCCL channel's placement rule: ranks on distinct GPUs pass, two ranks on one GPU are
// refused naming both and the MPI transport. Pure, checked without NCCL or a GPU.
#include "runtime/comm/nccl/nccl_placements.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpipe {
namespace {

using ::testing::HasSubstr;

TEST(CheckDistinctGpusTest, RanksOnDifferentGpusOrHostsPass) {
  const std::vector<std::string> placements = {"host a GPU 0000:1B:00.0", "host a GPU 0000:1C:00.0",
                                               "host b GPU 0000:1B:00.0"};
  EXPECT_TRUE(CheckDistinctGpus(placements).ok());
  EXPECT_TRUE(CheckDistinctGpus({}).ok());
}

TEST(CheckDistinctGpusTest, TwoRanksOnOneGpuAreRefusedNamingTheMpiTransport) {
  const std::vector<std::string> placements = {"host a GPU 0000:1B:00.0", "host a GPU 0000:1C:00.0",
                                               "host a GPU 0000:1B:00.0"};
  const absl::Status status = CheckDistinctGpus(placements);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("ranks 0 and 2 both compute on host a GPU 0000:1B:00.0"));
  EXPECT_THAT(status.message(), HasSubstr("transport: MPI"));
}

}  // namespace
}  // namespace gpipe
