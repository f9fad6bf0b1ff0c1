// gpipe-worker: one pipeline stage process. Started by mpirun/srun (usually through gpipe-run),
// one per rank; rank 0 also coordinates. See README.md for the flags.
//
// Exit codes: 0 the run finished; 1 it failed (every rank says why or names the rank that did),
// or MPI made this process a singleton although its launcher started several together
// (singleton_check.h); 2 bad flags; 3 it stopped early as asked by SIGINT, SIGTERM, SIGHUP,
// SIGQUIT or SIGUSR1 (whenever it came: one that arrives during start-up is acted on right after
// the setup), at a step boundary on every rank, after saving a checkpoint when the plan has one
// (else writing --export when asked); 128 + N a second signal N ended it at once.
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "launcher/environment.h"
#include "launcher/flags.h"
#include "launcher/singleton_check.h"
#include "launcher/startup_watchdog.h"
#include "launcher/stop_signals.h"
#include "runtime/comm/mpi_environment.h"
#include "runtime/coord/worker.h"
#include "runtime/core/logger.h"

namespace {

constexpr int kExitStopped = 3;

constexpr char kUsage[] =
    "usage: mpirun -np K gpipe-worker --plan PLAN.pbtxt [flags]\n"
    "  --plan FILE            the plan (protobuf text); read by rank 0 only\n"
    "  --override TEXT        text-proto fragment merged into the plan (repeatable, in order),\n"
    "                         e.g. --override 'pipeline { micro_batches: 16 }'\n"
    "  --metrics-out FILE     write one JSON object per step (overrides runtime.metrics_out)\n"
    "  --trace FILE           write a Chrome/Perfetto trace of the run (overrides runtime.trace)\n"
    "  --init-from PATH       load initial parameters by name from a .safetensors file, a\n"
    "                         directory with model.safetensors, or a model.safetensors.index.json\n"
    "                         and its shards (F32, BF16, F16)\n"
    "  --export FILE          write all parameters to a safetensors file after training\n"
    "  --export-dtype D       F32 (default) or BF16: how --export stores the values\n"
    "  --export-shard-bytes N split --export FILE.safetensors into shards of at most N bytes\n"
    "                         of data, FILE-00001-of-0000K.safetensors ... and\n"
    "                         FILE.safetensors.index.json, as save_pretrained does\n"
    "  --resume CKPT          continue from a checkpoint: latest (the plan's checkpoint.dir),\n"
    "                         a checkpoint directory, or one of its step-N directories\n"
    "  --start-over           train from the start although checkpoint.dir holds an earlier\n"
    "                         run's checkpoints (removed once this run's first is complete);\n"
    "                         without it such a run is refused (continue with --resume latest)\n"
    "  --startup-timeout SEC  how long ranks wait for rank 0's setup (default 120)\n"
    "  --help                 this text\n";

}  // namespace

int main(int argc, char** argv) {
  // First of all: a stop request that arrives while MPI starts or rank 0 sets the job up must be
  // recorded, not end the process by the signal's default action (mpirun forwards SIGUSR1 to
  // ranks that may still be starting).
  auto signals = gpipe::StopSignals::Install("gpipe-worker");
  if (!signals.ok()) {
    std::fprintf(stderr, "gpipe-worker: %s\n", std::string(signals.status().message()).c_str());
    return 1;
  }
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto flags = gpipe::ParseFlags({{"plan"},
                                  {"override", true, true},
                                  {"metrics-out"},
                                  {"trace"},
                                  {"init-from"},
                                  {"export"},
                                  {"export-dtype"},
                                  {"export-shard-bytes"},
                                  {"resume"},
                                  {"start-over", false},
                                  {"startup-timeout"},
                                  {"help", false}},
                                 args);
  if (!flags.ok()) {
    std::fprintf(stderr, "gpipe-worker: %s\n%s", std::string(flags.status().message()).c_str(),
                 kUsage);
    return 2;
  }
  if (flags->Has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  gpipe::WorkerOptions options;
  options.plan_path = flags->Get("plan").value_or("");
  options.overrides = flags->GetAll("override");
  options.metrics_out = flags->Get("metrics-out").value_or("");
  options.trace = flags->Get("trace").value_or("");
  options.init_from = flags->Get("init-from").value_or("");
  options.export_path = flags->Get("export").value_or("");
  if (const std::string dtype = flags->Get("export-dtype").value_or("F32"); dtype == "BF16") {
    options.export_dtype = gpipe::SafetensorsDtype::kBF16;
  } else if (dtype != "F32") {
    std::fprintf(stderr, "gpipe-worker: --export-dtype takes F32 or BF16, got '%s'\n%s",
                 dtype.c_str(), kUsage);
    return 2;
  }
  if (auto bytes = flags->Get("export-shard-bytes")) {
    auto parsed = gpipe::ParseByteCountFlag("--export-shard-bytes", *bytes);
    if (!parsed.ok()) {
      std::fprintf(stderr, "gpipe-worker: %s\n", std::string(parsed.status().message()).c_str());
      return 2;
    }
    options.export_shard_bytes = *parsed;
  }
  options.resume = flags->Get("resume").value_or("");
  options.start_over = flags->Has("start-over");
  // Quoted in the CUDA backend's messages when a rank finds no GPU (CUDA itself reads it).
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr) {
    options.cuda_visible_devices = visible;
  }
  if (auto timeout = flags->Get("startup-timeout")) {
    auto seconds = gpipe::ParseSecondsFlag("--startup-timeout", *timeout);
    if (!seconds.ok()) {
      std::fprintf(stderr, "gpipe-worker: %s\n", std::string(seconds.status().message()).c_str());
      return 2;
    }
    options.startup_timeout = absl::Seconds(*seconds);
  }
  if (options.plan_path.empty() || !flags->positional().empty()) {
    std::fprintf(stderr, "gpipe-worker: %s\n%s",
                 options.plan_path.empty() ? "--plan is required" : "unexpected argument", kUsage);
    return 2;
  }

  // Taken before MPI_Init, which may set variables of its own.
  const gpipe::Environment launch_environment = gpipe::ProcessEnvironment();
  // MPI_Init itself waits for every rank without a limit: bound it by the start-up deadline.
  gpipe::StartupWatchdog watchdog("MPI start-up", options.startup_timeout);
  auto mpi = gpipe::MpiEnvironment::Init(&argc, &argv);
  watchdog.Disarm();
  // Should MPI_Init have installed handlers of its own for these signals, ours come back.
  (*signals)->Reassert();
  if (!mpi.ok()) {
    std::fprintf(stderr, "gpipe-worker: %s\n", std::string(mpi.status().message()).c_str());
    return 1;
  }
  // Every one of N singletons would train the whole job alone: each says so and stops.
  if (absl::Status alone = gpipe::CheckNotAStraySingleton(launch_environment, (*mpi)->world_size());
      !alone.ok()) {
    std::fprintf(stderr, "gpipe-worker: error: %s\n", std::string(alone.message()).c_str());
    return 1;
  }
  options.stop_requested = [&signals] { return (*signals)->requested(); };
  const gpipe::Logger logger((*mpi)->rank());
  absl::Status status;
  try {
    status = gpipe::RunWorker(options, **mpi, logger);
  } catch (const std::bad_alloc&) {
    // A host allocation the memory check could not foresee: an error, not an abort.
    logger.Error("out of host memory (an allocation failed); the job stops");
    (*mpi)->MarkAborting();
    return 1;
  }
  if (status.ok()) return 0;
  return absl::IsCancelled(status) ? kExitStopped : 1;
}
