// gpipe-worker: one pipeline stage process. Started by mpirun/srun (usually through gpipe-run),
// one per rank; rank 0 also coordinates. See README.md for the flags.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "launcher/flags.h"
#include "runtime/comm/mpi_environment.h"
#include "runtime/coord/worker.h"
#include "runtime/core/logger.h"

namespace {

constexpr char kUsage[] =
    "usage: mpirun -np K gpipe-worker --plan PLAN.pbtxt [flags]\n"
    "  --plan FILE            the plan (protobuf text); read by rank 0 only\n"
    "  --override TEXT        text-proto fragment merged into the plan (repeatable, in order),\n"
    "                         e.g. --override 'pipeline { micro_batches: 16 }'\n"
    "  --metrics-out FILE     write one JSON object per step (overrides runtime.metrics_out)\n"
    "  --trace FILE           write a Chrome/Perfetto trace of the run (overrides runtime.trace)\n"
    "  --init-from FILE       load initial parameters from a safetensors file, by name\n"
    "  --export FILE          write all parameters to a safetensors file after training\n"
    "  --startup-timeout SEC  how long ranks wait for rank 0's setup (default 120)\n"
    "  --help                 this text\n";

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto flags = gpipe::ParseFlags({{"plan"},
                                  {"override", true, true},
                                  {"metrics-out"},
                                  {"trace"},
                                  {"init-from"},
                                  {"export"},
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

  auto mpi = gpipe::MpiEnvironment::Init(&argc, &argv);
  if (!mpi.ok()) {
    std::fprintf(stderr, "gpipe-worker: %s\n", std::string(mpi.status().message()).c_str());
    return 1;
  }
  const gpipe::Logger logger((*mpi)->rank());
  const absl::Status status = gpipe::RunWorker(options, **mpi, logger);
  return status.ok() ? 0 : 1;
}
