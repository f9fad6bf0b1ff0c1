// gpipe-run under Slurm, end to end on one machine: a fake `srun`, written by the test first on
// PATH, records its arguments and runs the job as Slurm would with a working PMI (mpirun -np N)
// or without one (N singletons, each with srun's task variables). Also gpipe-worker started as a
// lone singleton inside an srun step, and the cluster examples (examples/slurm, examples/cluster).
#include <signal.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/support/process_runner.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

namespace fs = std::filesystem;

// Launcher variables of the environment running the tests (which may itself be a Slurm job):
// every child starts without them and gets only the ones a test sets.
const std::vector<std::string> kLauncherVariables = {"SLURM_JOB_ID",
                                                     "SLURM_JOBID",
                                                     "SLURM_NTASKS",
                                                     "SLURM_NPROCS",
                                                     "SLURM_STEP_ID",
                                                     "SLURM_PROCID",
                                                     "SLURM_STEP_NUM_TASKS",
                                                     "SLURM_RESTART_COUNT",
                                                     "PMI_SIZE",
                                                     "PMI_RANK",
                                                     "PMIX_RANK",
                                                     "OMPI_COMM_WORLD_SIZE",
                                                     "OMPI_COMM_WORLD_RANK",
                                                     "FAKE_SRUN_MODE"};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteExecutable(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
  fs::permissions(path, fs::perms::owner_all);
}

class SlurmLaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_.path();
    fs::create_directories(dir_ / "fake-bin");
    // The mpirun flags the tests use (GPIPE_MPIRUN_FLAGS), without "mpirun -np 1".
    const std::vector<std::string> prefix = testing::MpirunPrefix(1);
    const std::string mpirun_flags =
        absl::StrJoin(std::vector<std::string>(prefix.begin() + 3, prefix.end()), " ");
    WriteExecutable(dir_ / "fake-bin" / "srun", absl::StrCat(R"(#!/bin/bash
# A stand-in for srun: records its arguments, one a line, then starts the tasks.
printf '%s\n' "$@" > ")",
                                                             (dir_ / "srun-args").string(), R"("
ntasks=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ntasks|-n) ntasks=$2; shift 2 ;;
    --input) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
if [[ ${FAKE_SRUN_MODE:-pmi} == pmi ]]; then
  # A working PMI: one MPI job of ntasks ranks. Open MPI must not take this for a real Slurm
  # allocation (it would look for SLURM_NODELIST), so the job id stays with srun.
  exec env -u SLURM_JOB_ID -u SLURM_JOBID -u SLURM_NTASKS SLURM_STEP_ID=0 \
    SLURM_STEP_NUM_TASKS="$ntasks" mpirun -np "$ntasks" )",
                                                             mpirun_flags, R"( "$@"
fi
# No PMI: every task is started alone, knowing only srun's variables.
pids=()
for ((task = 0; task < ntasks; task++)); do
  SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=$ntasks SLURM_PROCID=$task "$@" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || { code=$?; (( code > status )) && status=$code; }
done
exit $status
)"));
    WriteExecutable(dir_ / "fake-bin" / "scontrol",
                    absl::StrCat(R"(#!/bin/bash
printf '%s\n' "$@" > ")",
                                 (dir_ / "scontrol-args").string(), "\"\n"));
  }

  // `env` with the launcher variables removed, `variables` set and the fake srun first on PATH.
  std::vector<std::string> Env(const std::vector<std::string>& variables) const {
    std::vector<std::string> argv = {"env"};
    for (const std::string& name : kLauncherVariables) argv.insert(argv.end(), {"-u", name});
    const char* path = std::getenv("PATH");
    argv.push_back(absl::StrCat("PATH=", (dir_ / "fake-bin").string(), ":", path ? path : ""));
    argv.insert(argv.end(), variables.begin(), variables.end());
    return argv;
  }

  testing::ProcessResult Run(const std::vector<std::string>& variables,
                             const std::vector<std::string>& command, double timeout = 90,
                             const testing::ProcessWatcher& watch = nullptr) const {
    std::vector<std::string> argv = Env(variables);
    argv.insert(argv.end(), command.begin(), command.end());
    return testing::RunProcess(argv, timeout, watch);
  }

  const testing::ScratchDir scratch_;  // this test's own, removed after it
  fs::path dir_;
};

std::string FourStages() { return testing::SourcePath("tests/e2e/testdata/four_stages.pbtxt"); }

TEST_F(SlurmLaunchTest, InsideAnAllocationGpipeRunLaunchesWithSrun) {
  const testing::ProcessResult run =
      Run({"SLURM_JOB_ID=4242", "SLURM_NTASKS=2"},
          {testing::BinPath("gpipe-run"), FourStages(), "--override", "pipeline { stages: 2 }"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(
      absl::StrContains(run.output, "gpipe-run: launching with srun: inside Slurm job 4242"))
      << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "step 2/2")) << run.output;
  const std::string args = ReadFile(dir_ / "srun-args");
  EXPECT_TRUE(absl::StartsWith(args, "--input\nnone\n--ntasks\n2\n--kill-on-bad-exit=1\n")) << args;
  EXPECT_TRUE(absl::StrContains(args, "gpipe-worker\n--plan\n")) << args;
}

TEST_F(SlurmLaunchTest, TooFewSlurmTasksFailsBeforeLaunching) {
  const testing::ProcessResult run = Run({"SLURM_JOB_ID=4242", "SLURM_NTASKS=2"},
                                         {testing::BinPath("gpipe-run"), FourStages()}, 30);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output,
                                "Slurm job 4242 has 2 tasks (SLURM_NTASKS=2) but the "
                                "plan needs 4 processes (pipeline.stages 4 x "
                                "pipeline.data_parallel 1)"))
      << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "#SBATCH --ntasks=4")) << run.output;
  EXPECT_FALSE(fs::exists(dir_ / "srun-args")) << "srun was started:\n" << run.output;
}

TEST_F(SlurmLaunchTest, ExplicitMpirunWinsInsideAnAllocation) {
  const testing::ProcessResult run =
      Run({"SLURM_JOB_ID=4242", "SLURM_NTASKS=4"},
          {testing::BinPath("gpipe-run"), "--launcher", "mpirun", "--dry-run", FourStages()}, 30);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "mpirun --stdin none -np 4")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output,
                                "launching with mpirun: --launcher mpirun (inside "
                                "Slurm job 4242)"))
      << run.output;
}

TEST_F(SlurmLaunchTest, TheJobsExitCodeComesBackThroughSrun) {
  const testing::ProcessResult run =
      Run({"SLURM_JOB_ID=4242", "SLURM_NTASKS=2"},
          {testing::BinPath("gpipe-run"), FourStages(), "--override", "pipeline { stages: 2 }",
           "--init-from", "/nonexistent.safetensors"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "/nonexistent.safetensors: no such file"))
      << run.output;
}

TEST_F(SlurmLaunchTest, SrunWithoutPmiStopsEveryTaskAsASingleton) {
  const testing::ProcessResult run = Run(
      {"SLURM_JOB_ID=4242", "SLURM_NTASKS=2", "FAKE_SRUN_MODE=singletons"},
      {testing::BinPath("gpipe-run"), FourStages(), "--override", "pipeline { stages: 2 }"}, 60);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_FALSE(run.timed_out) << run.output;
  for (int task = 0; task < 2; ++task) {
    EXPECT_TRUE(absl::StrContains(
        run.output, absl::StrCat("MPI started this process as a singleton (1 rank), but srun "
                                 "started 2 tasks (SLURM_STEP_NUM_TASKS=2, this is task ",
                                 task, ")")))
        << run.output;
  }
  EXPECT_TRUE(absl::StrContains(run.output, "srun --mpi=pmix")) << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "step 1/")) << "a singleton trained:\n" << run.output;
}

TEST_F(SlurmLaunchTest, WorkerAloneInAMultiTaskStepFailsAtOnce) {
  // No mpirun: MPI makes this process a singleton while srun's variables say 2 tasks.
  const testing::ProcessResult run =
      Run({"SLURM_JOB_ID=4242", "SLURM_STEP_ID=0", "SLURM_STEP_NUM_TASKS=2", "SLURM_PROCID=1"},
          {testing::BinPath("gpipe-worker"), "--plan", FourStages()}, 60);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_LT(run.seconds, 30.0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output,
                                "gpipe-worker: error: MPI started this process as a singleton (1 "
                                "rank), but srun started 2 tasks (SLURM_STEP_NUM_TASKS=2, this is "
                                "task 1): MPI found no working PMI"))
      << run.output;
}

TEST_F(SlurmLaunchTest, AnEmbeddingProgramAloneInAMultiTaskStepFailsAtOnce) {
  // gpipe::Runtime::Create makes the same check (examples/embed's program here).
  if (!std::filesystem::exists(testing::BinPath("gpipe-embed-example"))) {
    GTEST_SKIP() << "built without GPIPE_BUILD_EXAMPLES";
  }
  const testing::ProcessResult run =
      Run({"SLURM_JOB_ID=4242", "SLURM_STEP_ID=0", "SLURM_STEP_NUM_TASKS=2", "SLURM_PROCID=0"},
          {testing::BinPath("gpipe-embed-example")}, 60);
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_LT(run.seconds, 30.0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output,
                                "error: MPI started this process as a singleton (1 rank), but srun "
                                "started 2 tasks (SLURM_STEP_NUM_TASKS=2, this is task 0)"))
      << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "step 20")) << "a singleton trained:\n" << run.output;
}

TEST_F(SlurmLaunchTest, ADeliberateSingleProcessRunStillTrains) {
  const testing::ProcessResult run =
      Run({"SLURM_JOB_ID=4242", "SLURM_STEP_ID=0", "SLURM_STEP_NUM_TASKS=1", "SLURM_PROCID=0"},
          {testing::BinPath("gpipe-worker"), "--plan", FourStages(), "--override",
           "pipeline { stages: 1 }"},
          60);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "step 2/2")) << run.output;
}

TEST_F(SlurmLaunchTest, TheBatchScriptParses) {
  const testing::ProcessResult run =
      testing::RunProcess({"bash", "-n", testing::SourcePath("examples/slurm/train.sbatch")}, 30);
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

TEST_F(SlurmLaunchTest, TheBatchScriptStopsWithACheckpointAndRequeuesOnItsSignal) {
  const fs::path bin_dir = fs::path(testing::BinPath("gpipe-run")).parent_path();
  const std::string checkpoints = (dir_ / "checkpoints").string();
  const std::vector<std::string> slurm = {"SLURM_JOB_ID=4242", "SLURM_NTASKS=2",
                                          absl::StrCat("GPIPE_BIN_DIR=", bin_dir.string()),
                                          "SLURM_MPI_TYPE=pmix"};
  const std::vector<std::string> script = {
      "bash", testing::SourcePath("examples/slurm/train.sbatch"), FourStages(), "--override",
      absl::StrCat("pipeline { stages: 2 } training { steps: 100000 } checkpoint { dir: \"",
                   checkpoints, "\" }")};
  bool signalled = false;
  // Slurm's --signal=B:TERM reaches the batch shell alone.
  const testing::ProcessResult run =
      Run(slurm, script, 120, [&signalled](pid_t pid, const std::string& output) {
        if (!signalled && absl::StrContains(output, "step 3/")) {
          signalled = true;
          ::kill(pid, SIGTERM);
        }
      });
  EXPECT_TRUE(signalled) << run.output;
  EXPECT_EQ(run.exit_code, 3) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "requeueing job 4242")) << run.output;
  EXPECT_EQ(ReadFile(dir_ / "scontrol-args"), "requeue\n4242\n") << run.output;
  EXPECT_TRUE(fs::exists(fs::path(checkpoints) / "latest")) << run.output;

  // The requeued run continues from the checkpoint (shown by the command it would launch).
  std::vector<std::string> requeued = slurm;
  requeued.push_back("SLURM_RESTART_COUNT=1");
  std::vector<std::string> dry_run = script;
  dry_run.push_back("--dry-run");
  const testing::ProcessResult again = Run(requeued, dry_run, 30);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_TRUE(absl::StrContains(again.output, "--resume latest")) << again.output;
}

// A job pre-empted before its first checkpoint used to be requeued with --resume latest, which
// fails on every restart: it starts afresh until `latest` exists.
TEST_F(SlurmLaunchTest, TheBatchScriptResumesOnlyWhenACheckpointExists) {
  const fs::path bin_dir = fs::path(testing::BinPath("gpipe-run")).parent_path();
  const fs::path checkpoints = dir_ / "checkpoints";
  const std::vector<std::string> requeued = {"SLURM_JOB_ID=4242", "SLURM_NTASKS=2",
                                             "SLURM_RESTART_COUNT=1",
                                             absl::StrCat("GPIPE_BIN_DIR=", bin_dir.string())};
  auto dry_run = [&](const std::vector<std::string>& overrides) {
    std::vector<std::string> script = {"bash", testing::SourcePath("examples/slurm/train.sbatch"),
                                       FourStages()};
    script.insert(script.end(), overrides.begin(), overrides.end());
    script.push_back("--dry-run");
    return Run(requeued, script, 30);
  };
  const std::string stages = "--override=pipeline { stages: 2 }";
  const std::string with_checkpoint =
      absl::StrCat("checkpoint { dir: \"", checkpoints.string(), "\" }");

  // No checkpoint.dir in the plan at all.
  testing::ProcessResult run = dry_run({stages});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "--resume")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "the plan has no checkpoint.dir")) << run.output;

  // A checkpoint.dir (set by an override, as --override X or --override=X) with no `latest`.
  run = dry_run({stages, "--override", with_checkpoint});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "--resume")) << run.output;
  EXPECT_TRUE(absl::StrContains(
      run.output, absl::StrCat(checkpoints.string(), "/latest is missing); starting from step 0")))
      << run.output;

  // Once `latest` exists the restart continues from it.
  fs::create_directories(checkpoints);
  std::ofstream(checkpoints / "latest") << "step-000000003\n";
  run = dry_run({stages, absl::StrCat("--override=", with_checkpoint)});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "--resume latest")) << run.output;
  // A submission that started over continues its own checkpoints on a requeue: --start-over
  // and --resume exclude each other, so the first is left out.
  run = dry_run({stages, absl::StrCat("--override=", with_checkpoint), "--start-over"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "--resume latest")) << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "--start-over")) << run.output;
}

TEST_F(SlurmLaunchTest, TheHostfileExampleDrivesMpirun) {
  const std::string hostfile = testing::SourcePath("examples/cluster/hostfile");
  // The example's slots (4 + 4) hold a 4-stage pipeline twice.
  const testing::ProcessResult run =
      Run({},
          {testing::BinPath("gpipe-run"), "--dry-run", "--launcher-arg", "--hostfile",
           "--launcher-arg", hostfile, FourStages(), "--override", "pipeline { data_parallel: 2 }"},
          30);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "mpirun --stdin none -np 8")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, absl::StrCat("--hostfile ", hostfile, " ")))
      << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "--oversubscribe")) << run.output;
  int slots = 0;
  std::istringstream lines(ReadFile(hostfile));
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find("slots=");
    if (line.empty() || line[0] == '#' || at == std::string::npos) continue;
    slots += std::atoi(line.c_str() + at + 6);
  }
  EXPECT_EQ(slots, 8);
}

}  // namespace
}  // namespace gpipe
