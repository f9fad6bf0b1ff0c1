#include "launcher/singleton_check.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {

constexpr char kPrefix[] = "MPI started this process as a singleton (1 rank), but ";

std::string TaskIndex(const Environment& env, const std::string& variable) {
  return Lookup(env, variable).value_or("unknown");
}

}  // namespace

absl::Status CheckNotAStraySingleton(const Environment& env, int world_size) {
  if (world_size != 1) return absl::OkStatus();

  // Open MPI's mpirun names the job's size for every rank it starts.
  if (std::optional<int64_t> size = LookupInt(env, "OMPI_COMM_WORLD_SIZE"); size.has_value()) {
    if (*size <= 1) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        kPrefix, "mpirun started ", *size, " processes (OMPI_COMM_WORLD_SIZE=", *size,
        ", this is rank ", TaskIndex(env, "OMPI_COMM_WORLD_RANK"),
        "): gpipe-worker's MPI library is not the one of that mpirun, so every process would run "
        "the whole job alone. Use the mpirun of the MPI gpipe-worker was built with (see `ldd "
        "gpipe-worker | grep -i mpi` and `mpirun --version`)."));
  }

  // srun: SLURM_STEP_NUM_TASKS is the step's task count; older Slurm sets only SLURM_NTASKS,
  // which counts the step only inside one (SLURM_STEP_ID set; in a batch script it counts the
  // allocation, which says nothing about how this process was started).
  std::optional<int64_t> step_tasks = LookupInt(env, "SLURM_STEP_NUM_TASKS");
  std::string step_variable = "SLURM_STEP_NUM_TASKS";
  if (!step_tasks.has_value() && Lookup(env, "SLURM_STEP_ID").has_value()) {
    step_tasks = LookupInt(env, "SLURM_NTASKS");
    step_variable = "SLURM_NTASKS";
  }
  const std::optional<int64_t> pmi_size = LookupInt(env, "PMI_SIZE");
  // Hydra's mpiexec starts its proxies with srun, one per node: its ranks inherit that step's
  // count, so PMI_SIZE decides when the two disagree.
  const bool srun_started_us = step_tasks.has_value() && *step_tasks > 1 &&
                               (!pmi_size.has_value() || *pmi_size == *step_tasks);
  if (srun_started_us) {
    const std::string offered =
        Lookup(env, "PMIX_RANK").has_value()
            ? "srun offered PMIx (PMIX_RANK is set) but this MPI library did not use it"
            : "MPI found no working PMI";
    return absl::FailedPreconditionError(absl::StrCat(
        kPrefix, "srun started ", *step_tasks, " tasks (", step_variable, "=", *step_tasks,
        ", this is task ", TaskIndex(env, "SLURM_PROCID"), "): ", offered,
        ", so every task would run the whole job alone. Launch with `srun --mpi=pmix` (see `srun "
        "--mpi=list`; gpipe-run --launcher-arg --mpi=pmix), or use mpirun inside the allocation "
        "(gpipe-run --launcher mpirun)."));
  }
  if (pmi_size.has_value() && *pmi_size > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        kPrefix, "its launcher started ", *pmi_size, " processes (PMI_SIZE=", *pmi_size,
        ", this is PMI_RANK ", TaskIndex(env, "PMI_RANK"),
        "): this MPI library did not use that launcher's PMI (an mpiexec of another MPI, or srun "
        "--mpi=pmi2 with an MPI built without it), so every process would run the whole job "
        "alone. Use the mpirun of the MPI gpipe-worker was built with, or `srun --mpi=pmix`."));
  }
  return absl::OkStatus();
}

}  // namespace gpipe
