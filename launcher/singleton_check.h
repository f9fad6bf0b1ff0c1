// CheckNotAStraySingleton: whether this gpipe-worker is an MPI singleton (a world of 1 rank)
// although its launcher started several processes together. That happens when the MPI library
// finds no working PMI to join the others (srun without --mpi=pmix, or an mpirun/mpiexec of
// another MPI than the one gpipe-worker was built with): every process would then train the
// whole job alone, each writing the same files. Pure: the environment snapshot (taken before
// MPI_Init, which may add variables of its own) and MPI's world size come in as parameters.
#ifndef GPIPE_LAUNCHER_SINGLETON_CHECK_H_
#define GPIPE_LAUNCHER_SINGLETON_CHECK_H_

#include "absl/status/status.h"
#include "launcher/environment.h"

namespace gpipe {

// OK when `world_size` > 1, or when nothing shows several processes started together (a
// deliberate single-process run, a one-task srun step, `mpirun -np 1`). Otherwise
// FAILED_PRECONDITION naming the launcher, its variable, this process's index and the fix.
// Evidence, in order: OMPI_COMM_WORLD_SIZE (Open MPI's mpirun sets it for every rank, so it
// decides even when Slurm variables were inherited through mpirun's daemons); srun's
// SLURM_STEP_NUM_TASKS (or SLURM_NTASKS inside a step, SLURM_STEP_ID set) with SLURM_PROCID;
// PMI_SIZE with PMI_RANK (MPICH/Intel Hydra mpiexec, srun --mpi=pmi2).
absl::Status CheckNotAStraySingleton(const Environment& env, int world_size);

}  // namespace gpipe

#endif  // GPIPE_LAUNCHER_SINGLETON_CHECK_H_
