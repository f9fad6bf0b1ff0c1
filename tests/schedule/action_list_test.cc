// The action-list grammar (PyTorch's compute-schedule CSV): what it accepts, where each action
// was written, and the exact messages for text it refuses.
#include "runtime/schedule/action_list.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpipe::schedule {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Names(const ActionRow& row) {
  std::vector<std::string> out;
  for (const Action& action : row.actions) out.push_back(ToString(action));
  return out;
}

TEST(ActionListTest, ParsesEveryComputationType) {
  absl::StatusOr<ActionRow> row = ParseActionText("0F0 1B2 3I4 15W16", "r");
  ASSERT_TRUE(row.ok()) << row.status();
  ASSERT_EQ(row->actions.size(), 4u);
  EXPECT_EQ(row->actions[0], (Action{ActionType::kForward, 0, 0, 0}));
  EXPECT_EQ(row->actions[1], (Action{ActionType::kFullBackward, 1, 2, 1}));
  EXPECT_EQ(row->actions[2], (Action{ActionType::kBackwardInput, 3, 4, 2}));
  EXPECT_EQ(row->actions[3], (Action{ActionType::kBackwardWeight, 15, 16, 3}));
}

TEST(ActionListTest, SpacesCommasAndEmptyCellsSeparateActions) {
  absl::StatusOr<ActionRow> row = ParseActionText(" 0F0,, 0F1 ,\t0B0\n0B1 ", "r");
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(Names(*row), (std::vector<std::string>{"0F0", "0F1", "0B0", "0B1"}));
  EXPECT_EQ(row->actions[2].index, 2);
}

TEST(ActionListTest, OverlapPairRunsItsFirstActionThenItsSecond) {
  absl::StatusOr<ActionRow> row = ParseActionText("0F0 ( 0F1 ; 1B0 )OVERLAP_F_B", "r");
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(Names(*row), (std::vector<std::string>{"0F0", "0F1", "1B0"}));
  EXPECT_EQ(row->actions[1].index, 1);
  EXPECT_EQ(row->actions[2].index, 1);
}

TEST(ActionListTest, CsvLinesAreRanksAndCellsKeepTheirColumn) {
  absl::StatusOr<ActionTable> table = ParseScheduleCsv("0F0,,0B0\r\n1F0, 1B0\n\n", "sched.csv");
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->size(), 2u);
  EXPECT_EQ((*table)[0].source, "sched.csv:1");
  EXPECT_EQ(Names((*table)[0]), (std::vector<std::string>{"0F0", "0B0"}));
  EXPECT_EQ((*table)[0].actions[1].index, 2);  // the empty cell counts as a column
  EXPECT_EQ(DescribeAction((*table)[1], (*table)[1].actions[1]), "sched.csv:2: action 1 (1B0)");
}

TEST(ActionListTest, UnknownComputationIsRefusedWithTheWholeMessage) {
  absl::StatusOr<ActionRow> row = ParseActionText("0F0 0X1", "pipeline.custom.ranks[0]");
  ASSERT_FALSE(row.ok());
  EXPECT_EQ(row.status().message(),
            "pipeline.custom.ranks[0]: action 1 (0X1): '0X1': 'X' is not a computation gpipe "
            "runs (F, B, I or W); communication actions are derived, not written; an action is "
            "<stage>F<mb>, <stage>B<mb>, <stage>I<mb>, <stage>W<mb> or "
            "(<action>;<action>)OVERLAP_F_B, e.g. 0F3");
}

TEST(ActionListTest, GarbageTextNamesTheCell) {
  absl::StatusOr<ActionTable> table = ParseScheduleCsv("0F0,0B0\nhello,1F0\n", "s.csv");
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(table.status().message(),
              HasSubstr("s.csv:2: action 0 (hello): 'hello' does not start with a stage id"));
}

TEST(ActionListTest, MissingMicroBatchAndTrailingTextAreRefused) {
  EXPECT_THAT(ParseActionText("3F", "r").status().message(),
              HasSubstr("r: action 0 (3F): '3F' does not end with a micro-batch id"));
  EXPECT_THAT(ParseActionText("3F1x", "r").status().message(),
              HasSubstr("'3F1x' does not end with a micro-batch id"));
  EXPECT_THAT(ParseActionText("3", "r").status().message(), HasSubstr("'3' has no F, B, I or W"));
}

TEST(ActionListTest, MalformedOverlapPairsAreRefused) {
  EXPECT_THAT(ParseActionText("(0F0)OVERLAP_F_B", "r").status().message(),
              HasSubstr("an OVERLAP_F_B pair holds 2 actions separated by ';', not 1"));
  EXPECT_THAT(ParseActionText("(0F0;0B0)", "r").status().message(),
              HasSubstr("a parenthesized pair must be written (<action>;<action>)OVERLAP_F_B"));
}

TEST(ActionListTest, EmptyCsvIsRefused) {
  EXPECT_EQ(ParseScheduleCsv("\n \n", "e.csv").status().message(),
            "e.csv: holds no rows; write one row of actions per rank, e.g. 0F0,0B0");
}

}  // namespace
}  // namespace gpipe::schedule
