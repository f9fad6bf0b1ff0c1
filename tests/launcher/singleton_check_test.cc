#include "launcher/singleton_check.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gpipe {
namespace {

TEST(SingletonCheckTest, ADeliberateSingleProcessRunIsFine) {
  EXPECT_TRUE(CheckNotAStraySingleton({}, 1).ok());
  // A one-task srun step, and `mpirun -np 1`.
  EXPECT_TRUE(CheckNotAStraySingleton(
                  {{"SLURM_JOB_ID", "9"}, {"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_PROCID", "0"}}, 1)
                  .ok());
  EXPECT_TRUE(CheckNotAStraySingleton({{"OMPI_COMM_WORLD_SIZE", "1"}}, 1).ok());
}

TEST(SingletonCheckTest, ABatchScriptsAllocationSizeIsNoEvidence) {
  // sbatch --ntasks=4 sets SLURM_NTASKS for the script itself, which may run one process.
  EXPECT_TRUE(CheckNotAStraySingleton({{"SLURM_JOB_ID", "9"}, {"SLURM_NTASKS", "4"}}, 1).ok());
}

TEST(SingletonCheckTest, AWorldOfSeveralRanksIsFine) {
  EXPECT_TRUE(CheckNotAStraySingleton({{"SLURM_STEP_NUM_TASKS", "4"}}, 4).ok());
}

TEST(SingletonCheckTest, SrunTasksWithoutPmiAreCaughtNamingTaskAndFix) {
  const absl::Status status = CheckNotAStraySingleton(
      {{"SLURM_JOB_ID", "9"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_PROCID", "2"}}, 1);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(status.message());
  EXPECT_TRUE(absl::StrContains(message,
                                "MPI started this process as a singleton (1 rank), but srun "
                                "started 4 tasks (SLURM_STEP_NUM_TASKS=4, this is task 2): MPI "
                                "found no working PMI"))
      << message;
  EXPECT_TRUE(absl::StrContains(message, "srun --mpi=pmix")) << message;
  EXPECT_TRUE(absl::StrContains(message, "--launcher mpirun")) << message;
}

TEST(SingletonCheckTest, OlderSlurmInsideAStepIsReadFromSlurmNtasks) {
  const absl::Status status = CheckNotAStraySingleton(
      {{"SLURM_STEP_ID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "1"}}, 1);
  EXPECT_TRUE(absl::StrContains(status.message(),
                                "srun started 2 tasks (SLURM_NTASKS=2, this is "
                                "task 1)"))
      << status;
}

TEST(SingletonCheckTest, PmixOfferedButUnusedIsSaid) {
  const absl::Status status = CheckNotAStraySingleton(
      {{"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "0"}, {"PMIX_RANK", "0"}}, 1);
  EXPECT_TRUE(absl::StrContains(status.message(), "srun offered PMIx (PMIX_RANK is set)"))
      << status;
}

TEST(SingletonCheckTest, OpenMpiMpirunDecidesOverInheritedSlurmVariables) {
  // mpirun inside an allocation starts its daemons with srun; ranks inherit that step's count.
  EXPECT_TRUE(
      CheckNotAStraySingleton(
          {{"OMPI_COMM_WORLD_SIZE", "1"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "0"}}, 1)
          .ok());
  const absl::Status status =
      CheckNotAStraySingleton({{"OMPI_COMM_WORLD_SIZE", "3"}, {"OMPI_COMM_WORLD_RANK", "1"}}, 1);
  EXPECT_TRUE(absl::StrContains(status.message(),
                                "mpirun started 3 processes "
                                "(OMPI_COMM_WORLD_SIZE=3, this is rank 1)"))
      << status;
}

TEST(SingletonCheckTest, PmiSizeFromAnotherMpiexecIsCaught) {
  // Hydra inside an allocation: its proxies' step has 2 tasks (nodes), the job 8 processes.
  const absl::Status status = CheckNotAStraySingleton(
      {{"PMI_SIZE", "8"}, {"PMI_RANK", "5"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "1"}},
      1);
  EXPECT_TRUE(absl::StrContains(
      status.message(), "its launcher started 8 processes (PMI_SIZE=8, this is PMI_RANK 5)"))
      << status;
}

TEST(SingletonCheckTest, UnreadableCountsAreIgnored) {
  EXPECT_TRUE(CheckNotAStraySingleton({{"SLURM_STEP_NUM_TASKS", "four"}}, 1).ok());
}

}  // namespace
}  // namespace gpipe
