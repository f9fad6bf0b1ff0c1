// ResolveJob: rank 0's start-up work: resolve the plan (ResolvePlan: load file or text with the
// overrides, balance, validate, infer shapes), build and verify the schedule, check --init-from,
// every output path (export, metrics, trace, checkpoint.dir: output_path.h) against the run's
// inputs (file_ownership.h), claim checkpoint.dir (its lock, its use as a save would use it, no
// takeover of an earlier run's checkpoints: checkpoint_claim.h), check the --resume checkpoint
// (resume_source.h), and
// produce every rank's Setup message. No MPI; it reads only the plan, its data files (their
// fingerprint), those paths and the checkpoints' manifests. Any problem is one error whose
// message every rank prints.
#ifndef GPIPE_RUNTIME_COORD_SETUP_BUILDER_H_
#define GPIPE_RUNTIME_COORD_SETUP_BUILDER_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/registry.h"
#include "proto/control.pb.h"
#include "runtime/ckpt/checkpoint_lock.h"
#include "runtime/coord/worker_options.h"
#include "runtime/core/file_ownership.h"
#include "runtime/data/data_source_registry.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/schedule/verifier.h"

namespace gpipe {

struct ResolvedJob {
  AnalyzedPlan analyzed;
  schedule::VerifyResult prediction;  // simulated with per-stage FLOP costs
  std::vector<pb::Setup> setups;      // index = rank
  RunFiles files;                     // what the run reads, keeps and writes (file_ownership.h)
  // checkpoint.dir's lock, held for the job's life (the session keeps it); none without one.
  std::optional<CheckpointDirLock> checkpoint_lock;
};

// `data_sources`: the program's custom data sources (null: none); a plan naming another is
// refused.
absl::StatusOr<ResolvedJob> ResolveJob(const WorkerOptions& options, int world_size,
                                       const LayerRegistry& registry,
                                       const DataSourceRegistry* data_sources = nullptr);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_SETUP_BUILDER_H_
