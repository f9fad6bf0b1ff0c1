// The matching a transport that pairs point-to-point operations by issue order per pair of
// ranks (NCCL) needs: every built program passes it, interleaved programs at K = 2 included
// (activations and gradients then travel between the same two ranks in both directions), and
// a program whose receives of the two kinds come in another order than the sends is refused,
// naming both instructions.
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/schedule/build_program.h"
#include "runtime/schedule/schedule_shape.h"
#include "runtime/schedule/transfers.h"
#include "tests/schedule/schedule_test_util.h"

namespace gpipe::schedule {
namespace {

using ::gpipe::schedule::testing::ShapeName;
using ::gpipe::schedule::testing::VirtualStagesToTry;
using ::testing::HasSubstr;

TEST(PeerOrderTest, EveryBuiltProgramMatchesPerPairOfRanks) {
  int checked = 0;
  for (pb::Schedule kind : AllSchedules()) {
    for (int k = 1; k <= 8; ++k) {
      for (int m = 1; m <= 24; ++m) {
        for (int v : VirtualStagesToTry(kind)) {
          if (!CheckScheduleShape(kind, k, m, v).ok()) continue;
          const absl::StatusOr<Program> program = BuildProgram(kind, k, m, v);
          ASSERT_TRUE(program.ok()) << ShapeName(kind, k, m, v) << ": " << program.status();
          const Transfers transfers = Transfers::Collect(*program);
          ASSERT_TRUE(transfers.Check(*program).ok());
          const absl::Status per_peer = transfers.CheckPerPeerOrder(*program);
          EXPECT_TRUE(per_peer.ok()) << ShapeName(kind, k, m, v) << ": " << per_peer;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 500);
}

TEST(PeerOrderTest, ReceivesOfBothKindsInAnotherOrderAreRefusedNamingBoth) {
  // K = 2 interleaved: stage 1 receives activations and gradients from stage 0. Swapping its
  // first gradient receive with the activation receive just before it keeps each kind's order
  // (MPI, matching by tag, is content) but not the order per pair of ranks.
  absl::StatusOr<Program> program = BuildProgram(pb::INTERLEAVED_1F1B, 2, 4, 2);
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<Instruction>& stage1 = program->stage_programs[1].instructions;
  int grad = -1, activation = -1;
  for (int i = 0; i < static_cast<int>(stage1.size()) && grad < 0; ++i) {
    if (std::holds_alternative<RecvActivation>(stage1[i])) activation = i;
    if (std::holds_alternative<RecvGrad>(stage1[i])) grad = i;
  }
  ASSERT_GE(activation, 0);
  ASSERT_GT(grad, activation);
  std::swap(stage1[activation], stage1[grad]);
  const Transfers transfers = Transfers::Collect(*program);
  ASSERT_TRUE(transfers.Check(*program).ok()) << transfers.Check(*program);
  const absl::Status per_peer = transfers.CheckPerPeerOrder(*program);
  EXPECT_EQ(per_peer.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(per_peer.message()),
              HasSubstr(absl::StrCat("stage 1, instruction #", activation,
                                     " RecvGrad(mb=0) is the receive number")));
  EXPECT_THAT(std::string(per_peer.message()),
              HasSubstr("SendActivation(mb=2): a transport that matches by issue order per pair "
                        "of ranks (NCCL) would pair them"));
}

}  // namespace
}  // namespace gpipe::schedule
