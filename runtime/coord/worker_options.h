// WorkerOptions: what a gpipe-worker process was asked to do. Filled by launcher/ from flags;
// only rank 0's plan-related options matter (it sends the resolved choices to every rank).
#ifndef GPIPE_RUNTIME_COORD_WORKER_OPTIONS_H_
#define GPIPE_RUNTIME_COORD_WORKER_OPTIONS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "runtime/ckpt/safetensors.h"

namespace gpipe {

struct WorkerOptions {
  std::string plan_path;               // --plan
  // The plan's text instead of a file (the embedding API): plan_source_name stands for the file
  // in messages and locations, and relative data paths resolve against plan_directory ("": the
  // working directory).
  std::optional<std::string> plan_text;
  std::string plan_source_name = "<plan>";
  std::string plan_directory;
  std::vector<std::string> overrides;  // --override, in order
  std::string metrics_out;             // --metrics-out (overrides runtime.metrics_out)
  std::string trace;                   // --trace (overrides runtime.trace)
  std::string init_from;               // --init-from FILE.safetensors
  std::string export_path;             // --export FILE.safetensors
  SafetensorsDtype export_dtype = SafetensorsDtype::kF32;  // --export-dtype F32|BF16
  int64_t export_shard_bytes = 0;                          // --export-shard-bytes N (0: one file)
  std::string resume;                  // --resume latest|DIR (checkpoint_layout.h)
  // --start-over: train from the start in a checkpoint.dir holding an earlier run's complete
  // checkpoints, removing them once this run's first checkpoint is complete.
  bool start_over = false;
  // Polled at every step's and evaluation batch's gradient-sync barrier, and once before the
  // first step: true asks the job to stop after that step (abandoning an evaluation, saving a
  // checkpoint when the plan has checkpoint.dir). Null: never (the embedding program decides);
  // gpipe-worker sets it from SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGUSR1 (stop_signals.h).
  std::function<bool()> stop_requested;
  // $CUDA_VISIBLE_DEVICES (nullopt: unset), quoted in messages about missing GPUs.
  std::optional<std::string> cuda_visible_devices;
  // How long non-root ranks wait for rank 0's setup message (rank 0 parses the plan meanwhile).
  absl::Duration startup_timeout = absl::Seconds(120);
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_WORKER_OPTIONS_H_
