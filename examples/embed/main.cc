// gpipe-embed-example: a program that embeds gpipe. It registers a custom layer (scaled_tanh,
// CPU kernels, and CUDA kernels where built with CUDA) and a custom in-memory data source
// (clusters), and trains a classifier through a 2-stage pipeline on its own MPI job: run it with
// `mpirun -np 2 gpipe-embed-example`.
//
//   gpipe-embed-example [--steps N] [--device CPU|CUDA] [--export FILE.safetensors]
//
// The arguments set fields of a pb::Plan parsed from the built-in text, never text of their own:
// an argument is a number or an enum name, or a usage error, so it cannot add plan fields.
//
// Exit codes: 0 trained (and the held-out accuracy beat chance), 1 failed, 2 bad arguments.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "cluster_source.h"
#include "google/protobuf/text_format.h"
#include "gpipe/gpipe.h"
#include "scaled_tanh.h"
#include "scaled_tanh_cuda.h"

namespace {

// The plan, as text: 4 layers cut into 2 stages, 4 micro-batches, the GPipe schedule.
// clang-format off
constexpr char kPlan[] = R"pb(
  name: "embed-example"
  model {
    input { shape: [16] }
    layers { name: "fc1" linear { out_features: 64 } }
    layers { name: "act1" custom { type: "scaled_tanh" numbers { key: "scale" value: 1.5 } } }
    layers { name: "fc2" linear { out_features: 64 } }
    layers { name: "act2" custom { type: "scaled_tanh" } }
    layers { name: "head" linear { out_features: 4 } }
    loss { softmax_cross_entropy {} }
  }
  pipeline { stages: 2 micro_batches: 4 schedule: GPIPE }
  training {
    global_batch: 64
    steps: 60
    seed: 7
    eval_every: 30
    optimizer { sgd { lr: 0.1 momentum: 0.9 } }
  }
  data {
    custom {
      name: "clusters"
      eval_split: true
      numbers { key: "samples" value: 2048 }
      numbers { key: "spread" value: 4.0 }
    }
    shuffle: true
  }
  runtime { device: CPU log_every: 0 }
)pb";
// clang-format on

constexpr char kUsage[] =
    "usage: gpipe-embed-example [--steps N] [--device CPU|CUDA] [--export FILE]\n"
    "  --steps N    training steps, a whole number >= 1 (default 60)\n"
    "  --device D   CPU (default) or CUDA\n";

int Usage(const std::string& problem) {
  std::fprintf(stderr, "gpipe-embed-example: %s\n%s", problem.c_str(), kUsage);
  return 2;
}

int Run(int argc, char** argv) {
  gpipe::pb::Plan plan;
  if (!google::protobuf::TextFormat::ParseFromString(kPlan, &plan)) {
    std::fprintf(stderr, "gpipe-embed-example: the built-in plan does not parse\n");
    return 1;
  }
  std::string export_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg != "--steps" && arg != "--device" && arg != "--export") {
      return Usage("unknown argument '" + arg + "'");
    }
    if (i + 1 >= argc) return Usage(arg + " needs a value");
    const std::string value = argv[++i];
    if (arg == "--steps") {
      int64_t steps = 0;
      if (!absl::SimpleAtoi(value, &steps) || steps < 1) {
        return Usage("--steps needs a whole number >= 1, got '" + value + "'");
      }
      plan.mutable_training()->set_steps(steps);
    } else if (arg == "--device") {
      gpipe::pb::Device device = gpipe::pb::CPU;
      if (!gpipe::pb::Device_Parse(value, &device) ||
          (device != gpipe::pb::CPU && device != gpipe::pb::CUDA)) {
        return Usage("--device needs CPU or CUDA, got '" + value + "'");
      }
      plan.mutable_runtime()->set_device(device);
    } else {
      export_path = value;
    }
  }
  const gpipe::PlanSource source = gpipe::PlanSource::Proto(plan, "embed-example.pbtxt");

  gpipe::Extensions extensions;
  // CPU kernels always; CUDA kernels where the example was built with CUDA (null otherwise).
  absl::Status added = extensions.AddLayer({.type = "scaled_tanh",
                                            .cpu = gpipe_example::ScaledTanh::Create,
                                            .cuda = gpipe_example::ScaledTanhCudaFactory()});
  if (added.ok()) added = extensions.AddDataSource("clusters", gpipe_example::ClusterSource::Open);
  if (!added.ok()) {
    std::fprintf(stderr, "%s\n", std::string(added.message()).c_str());
    return 1;
  }

  auto runtime = gpipe::Runtime::Create(MPI_COMM_WORLD, source, extensions);
  if (!runtime.ok()) return 1;  // every rank printed why
  gpipe::Runtime& job = **runtime;

  double accuracy = -1.0;
  gpipe::Callbacks callbacks;
  callbacks.on_step = [](const gpipe::StepMetrics& m) {
    if ((m.step + 1) % 20 == 0) {
      std::printf("step %lld: loss %.4f, accuracy %.1f%%\n", static_cast<long long>(m.step + 1),
                  m.loss, 100.0 * m.accuracy);
    }
    return gpipe::StepAction::kContinue;
  };
  callbacks.on_evaluation = [&accuracy](const gpipe::EvalMetrics& m) {
    std::printf("held-out after step %lld: loss %.4f, accuracy %.1f%%\n",
                static_cast<long long>(m.after_step), m.loss, 100.0 * m.accuracy);
    accuracy = m.accuracy;
  };

  auto trained = job.Train(callbacks);
  if (trained.ok() && !export_path.empty()) {
    if (absl::Status exported = job.Export(export_path); !exported.ok()) return 1;
  }
  if (!trained.ok() || !job.Finish().ok()) return 1;
  if (job.rank() == 0) {
    std::printf("trained %lld steps on %d ranks (stage %d of %d here)\n",
                static_cast<long long>(trained->steps_done), job.world_size(), job.stage(),
                job.plan().pipeline().stages());
    // Four classes: chance is 25%.
    if (accuracy < 0.5) {
      std::fprintf(stderr, "held-out accuracy %.1f%% is too low\n", 100.0 * accuracy);
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  const int code = Run(argc, argv);
  if (code == 1) {
    // After a failure MPI may hold operations that never complete: end the whole job.
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return code;
}
