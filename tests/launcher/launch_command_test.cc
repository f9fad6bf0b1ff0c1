#include "launcher/launch_command.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace gpipe {
namespace {

LaunchRequest FourRanks() {
  LaunchRequest request;
  request.processes = 4;
  request.processes_origin = "pipeline.stages 4 x pipeline.data_parallel 1";
  request.worker_argv = {"/bin/gpipe-worker", "--plan", "plan.pbtxt"};
  request.local_cpus = 16;
  return request;
}

std::string Joined(const LaunchCommand& command) { return absl::StrJoin(command.argv, " "); }

TEST(LaunchCommandTest, OutsideSlurmTheDefaultIsMpirunWithoutNotes) {
  auto command = BuildLaunchCommand(FourRanks(), {});
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_EQ(command->launcher, "mpirun");
  EXPECT_EQ(Joined(*command), "mpirun --stdin none -np 4 /bin/gpipe-worker --plan plan.pbtxt");
  EXPECT_TRUE(command->notes.empty());
}

TEST(LaunchCommandTest, MpirunOversubscribesOnlyPastTheLocalCoresWithoutHosts) {
  LaunchRequest request = FourRanks();
  request.local_cpus = 2;
  request.as_root = true;
  auto local = BuildLaunchCommand(request, {});
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(Joined(*local),
            "mpirun --stdin none -np 4 --allow-run-as-root --oversubscribe --bind-to none "
            "/bin/gpipe-worker --plan plan.pbtxt");
  // A host list decides the slots: no oversubscription, the launcher arguments come next.
  request.launcher_args = {"--hostfile", "hosts"};
  auto hosts = BuildLaunchCommand(request, {});
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_EQ(Joined(*hosts),
            "mpirun --stdin none -np 4 --allow-run-as-root --hostfile hosts /bin/gpipe-worker "
            "--plan plan.pbtxt");
}

TEST(LaunchCommandTest, InsideAnAllocationTheDefaultIsSrunWithKillOnBadExit) {
  auto command = BuildLaunchCommand(FourRanks(), {{"SLURM_JOB_ID", "777"}, {"SLURM_NTASKS", "4"}});
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_EQ(command->launcher, "srun");
  EXPECT_EQ(Joined(*command),
            "srun --input none --ntasks 4 --kill-on-bad-exit=1 /bin/gpipe-worker --plan "
            "plan.pbtxt");
  ASSERT_EQ(command->notes.size(), 1u);
  EXPECT_TRUE(absl::StrContains(command->notes[0], "launching with srun: inside Slurm job 777"))
      << command->notes[0];
  EXPECT_TRUE(absl::StrContains(command->notes[0], "--launcher mpirun")) << command->notes[0];
}

TEST(LaunchCommandTest, ExplicitMpirunWinsInsideAnAllocation) {
  LaunchRequest request = FourRanks();
  request.launcher = "mpirun";
  request.local_cpus = 1;  // the allocation's slots decide, not this node's cores
  auto command = BuildLaunchCommand(request, {{"SLURM_JOB_ID", "777"}, {"SLURM_NTASKS", "2"}});
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_EQ(Joined(*command), "mpirun --stdin none -np 4 /bin/gpipe-worker --plan plan.pbtxt");
  ASSERT_EQ(command->notes.size(), 1u);
  EXPECT_TRUE(absl::StrContains(command->notes[0], "launching with mpirun: --launcher mpirun"))
      << command->notes[0];
}

TEST(LaunchCommandTest, TooFewSlurmTasksFailsNamingBothNumbersAndTheFix) {
  auto command = BuildLaunchCommand(FourRanks(), {{"SLURM_JOB_ID", "777"}, {"SLURM_NTASKS", "2"}});
  ASSERT_FALSE(command.ok());
  EXPECT_EQ(command.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(command.status().message());
  EXPECT_TRUE(absl::StrContains(message, "Slurm job 777 has 2 tasks (SLURM_NTASKS=2)")) << message;
  EXPECT_TRUE(absl::StrContains(message,
                                "needs 4 processes (pipeline.stages 4 x pipeline.data_parallel 1)"))
      << message;
  EXPECT_TRUE(absl::StrContains(message, "#SBATCH --ntasks=4")) << message;
}

TEST(LaunchCommandTest, SlurmNprocsIsReadWhenNtasksIsMissing) {
  auto command = BuildLaunchCommand(FourRanks(), {{"SLURM_JOB_ID", "777"}, {"SLURM_NPROCS", "3"}});
  ASSERT_FALSE(command.ok());
  EXPECT_TRUE(absl::StrContains(command.status().message(), "3 tasks (SLURM_NPROCS=3)"))
      << command.status();
}

TEST(LaunchCommandTest, MoreSlurmTasksThanNeededRunsASubsetWithANote) {
  auto command = BuildLaunchCommand(FourRanks(), {{"SLURM_JOB_ID", "777"}, {"SLURM_NTASKS", "8"}});
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_TRUE(absl::StrContains(Joined(*command), "--ntasks 4")) << Joined(*command);
  ASSERT_EQ(command->notes.size(), 2u);
  EXPECT_TRUE(absl::StrContains(command->notes[1], "has 8 tasks (SLURM_NTASKS); this job uses 4"))
      << command->notes[1];
}

TEST(LaunchCommandTest, AnAllocationWithoutATaskCountIsLeftToSrun) {
  auto command = BuildLaunchCommand(FourRanks(), {{"SLURM_JOB_ID", "777"}});
  ASSERT_TRUE(command.ok()) << command.status();
  ASSERT_EQ(command->notes.size(), 2u);
  EXPECT_TRUE(absl::StrContains(command->notes[1], "sets no task count")) << command->notes[1];
}

TEST(LaunchCommandTest, InsideAOneTaskStepTheStepsCountIsNotTheAllocations) {
  // `srun --pty bash` in a four-task allocation: SLURM_NTASKS=1 describes the shell's step.
  auto command = BuildLaunchCommand(FourRanks(), {{"SLURM_JOB_ID", "777"},
                                                  {"SLURM_NTASKS", "1"},
                                                  {"SLURM_STEP_ID", "0"},
                                                  {"SLURM_STEP_NUM_TASKS", "1"},
                                                  {"SLURM_PROCID", "0"}});
  ASSERT_TRUE(command.ok()) << command.status();
  ASSERT_EQ(command->notes.size(), 2u);
  EXPECT_TRUE(absl::StrContains(command->notes[1], "inside step 0 of Slurm job 777"))
      << command->notes[1];
  EXPECT_TRUE(absl::StrContains(command->notes[1], "--overlap")) << command->notes[1];
}

TEST(LaunchCommandTest, GpipeRunStartedAsSeveralSrunTasksFails) {
  auto command = BuildLaunchCommand(
      FourRanks(), {{"SLURM_JOB_ID", "777"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_PROCID", "2"}});
  ASSERT_FALSE(command.ok());
  EXPECT_TRUE(absl::StrContains(command.status().message(),
                                "one of 4 tasks that srun started (SLURM_STEP_NUM_TASKS=4, this "
                                "is task 2)"))
      << command.status();
}

TEST(LaunchCommandTest, SrunOutsideAnAllocationIsAllowedWithANote) {
  LaunchRequest request = FourRanks();
  request.launcher = "srun";
  request.launcher_args = {"--partition=gpu", "--time=10"};
  auto command = BuildLaunchCommand(request, {});
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_EQ(Joined(*command),
            "srun --input none --ntasks 4 --kill-on-bad-exit=1 --partition=gpu --time=10 "
            "/bin/gpipe-worker --plan plan.pbtxt");
  ASSERT_EQ(command->notes.size(), 1u);
  EXPECT_TRUE(absl::StrContains(command->notes[0], "SLURM_JOB_ID is not set")) << command->notes[0];
  EXPECT_TRUE(absl::StrContains(command->notes[0], "new allocation of 4 tasks"))
      << command->notes[0];
}

TEST(LaunchCommandTest, AnUnknownLauncherIsAnError) {
  LaunchRequest request = FourRanks();
  request.launcher = "aprun";
  auto command = BuildLaunchCommand(request, {});
  ASSERT_FALSE(command.ok());
  EXPECT_EQ(command.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(command.status().message(), "got 'aprun'")) << command.status();
}

}  // namespace
}  // namespace gpipe
