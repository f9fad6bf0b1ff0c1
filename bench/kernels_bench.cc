// gpipe-bench-kernels: how close a backend's layers come to the device's own GEMM speed.
//
// It measures the SGEMM peak through the device's matmul ops (CPU: single-thread or --threads N;
// --device cuda: the first GPU, fp32 without TF32 unless the plan allows it) (the best of
// several large square and rectangular shapes), then times forward and backward (and the split
// halves where a layer splits) of linear, conv2d and causal self-attention at representative
// shapes, with layer_norm and gelu as memory-bound references, and prints a markdown section:
// per layer the median times and the achieved GFLOP/s (forward FLOPs x 3 over forward plus
// backward time) as a share of the GEMM peak. Layers are timed by the layer profiler
// (runtime/estimate/layer_profiler.h), the same code that writes the simulated device's profile.
// --json prints the same rows as JSON lines instead (what bench/torch_gpu_compare.py reads), and
// --block B,T,D,H times only a transformer_block of D width and H heads on B samples of T
// positions, on any device.
//
//   gpipe-bench-kernels [--quick] [--threads N] [--clock cpu|wall] [--device cpu|cuda]
//                       [--precision fp32|bf16] [--peak-tflops X] [--only TEXT]
//                       [--block B,T,D,H] [--repeats N] [--json] [--cublaslt]
//                       [--cudnn-attention]
//   gpipe-bench-kernels --profile PLAN [-o profile.json] [--override TEXT]... [--repeats N]
//                       [--threads N] [--clock cpu|wall]
//
// With --profile it instead writes the plan's layer profile JSON (ProfileAnalyzedPlanLayers) to
// -o, or to stdout without it. Timings are benchmarks, not tests: compare within one run.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/kernels_bench_args.h"
#include "google/protobuf/text_format.h"
#include "layers/registry.h"
#include "runtime/backend/standalone_device.h"
#include "runtime/core/file_io.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"
#include "runtime/estimate/layer_profiler.h"
#include "runtime/estimate/resolve_plan.h"
#include "runtime/exec/bf16_layer.h"

namespace gpipe {
namespace {

struct GemmShape {
  int64_t m, n, k;
};

struct GemmPeak {
  GemmShape shape{};
  double gflops = 0;
};

// How rates are printed: GFLOP/s on a CPU, TFLOP/s on a GPU.
struct RateUnit {
  const char* name = "GFLOP/s";
  double per_gflops = 1.0;  // printed value = GFLOP/s * per_gflops
};

// Median seconds on `clock` of `repeats` calls after one warm-up call, each timed until the
// device has finished it.
template <typename Call>
absl::StatusOr<double> MedianSeconds(Device& device, ProfileClock clock, int repeats, Call call) {
  RETURN_IF_ERROR(call());
  RETURN_IF_ERROR(device.Synchronize());
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    const double start = NowMicros(clock);
    RETURN_IF_ERROR(call());
    RETURN_IF_ERROR(device.Synchronize());
    seconds.push_back((NowMicros(clock) - start) * 1e-6);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

absl::StatusOr<Tensor> FilledTensor(Device& device, int64_t rows, int64_t cols, float value) {
  ASSIGN_OR_RETURN(Tensor t,
                   Tensor::Empty(device, Shape{rows, cols}, DType::kF32, MemoryKind::kData));
  RETURN_IF_ERROR(device.ops().tensor.Fill(t, value));
  return t;
}

// The best GFLOP/s of C = A B over `shapes`, printed as a table as it goes.
absl::StatusOr<GemmPeak> MeasureGemmPeak(Device& device, const std::vector<GemmShape>& shapes,
                                         ProfileClock clock, int repeats, RateUnit unit,
                                         ProductPrecision precision, bool json) {
  if (!json) std::printf("| GEMM m x n x k | ms | %s |\n|---|---|---|\n", unit.name);
  GemmPeak best;
  for (const GemmShape& s : shapes) {
    ASSIGN_OR_RETURN(Tensor a, FilledTensor(device, s.m, s.k, 0.5f));
    ASSIGN_OR_RETURN(Tensor b, FilledTensor(device, s.k, s.n, 0.25f));
    ASSIGN_OR_RETURN(Tensor c, FilledTensor(device, s.m, s.n, 0.0f));
    ASSIGN_OR_RETURN(double seconds, MedianSeconds(device, clock, repeats, [&] {
                       return device.ops().matmul.Gemm(
                           WholeMatrix(a, s.m, s.k), WholeMatrix(b, s.k, s.n),
                           WholeMatrix(c, s.m, s.n), {.precision = precision});
                     }));
    const double gflops = 2.0 * s.m * s.n * s.k / seconds * 1e-9;
    if (json) {
      std::printf(
          "{\"kind\": \"gemm\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"ms\": %.6g, "
          "\"gflops\": %.6g}\n",
          static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k),
          seconds * 1e3, gflops);
    } else {
      std::printf("| %lld x %lld x %lld | %.2f | %.1f |\n", static_cast<long long>(s.m),
                  static_cast<long long>(s.n), static_cast<long long>(s.k), seconds * 1e3,
                  gflops * unit.per_gflops);
    }
    if (gflops > best.gflops) best = {s, gflops};
  }
  return best;
}

// One benchmarked layer: its plan entry, per-sample input shape and batch.
struct LayerCase {
  std::string entry;  // protobuf text of a pb::Layer
  Shape input_shape;
  int64_t batch;
  std::string shape;  // as printed
  bool memory_bound = false;
};

std::vector<LayerCase> LayerCases(bool gpu, const BenchOptions& options) {
  if (options.block) {
    const auto [batch, positions, width, heads] = *options.block;
    return {{absl::StrFormat("name: 'block' transformer_block { num_heads: %d }", heads),
             Shape{positions, width}, batch,
             absl::StrFormat("%d x T %d x d %d, %d heads", batch, positions, width, heads)}};
  }
  // Pipelines run small micro-batches: the linear and relu rows come at 8, 32 and 256 rows.
  std::vector<LayerCase> cases = {
      {"name: 'linear' linear { out_features: 1024 }", Shape{1024}, 8, "8 x 1024 -> 1024"},
      {"name: 'linear' linear { out_features: 1024 }", Shape{1024}, 32, "32 x 1024 -> 1024"},
      {"name: 'linear' linear { out_features: 1024 }", Shape{1024}, 256, "256 x 1024 -> 1024"},
      {"name: 'linear' linear { out_features: 1024 }", Shape{4096}, 256, "256 x 4096 -> 1024"},
      {"name: 'linear' linear { out_features: 4096 }", Shape{1024}, 256, "256 x 1024 -> 4096"},
      {"name: 'conv2d' conv2d { out_channels: 64 kernel_size: 3 padding: 1 }", Shape{64, 32, 32},
       32, "32 x 64x32x32 -> 64, 3x3 pad 1"},
      {"name: 'conv2d' conv2d { out_channels: 64 kernel_size: 3 padding: 1 }", Shape{3, 32, 32}, 32,
       "32 x 3x32x32 -> 64, 3x3 pad 1"},
      {"name: 'conv2d' conv2d { out_channels: 64 kernel_size: 1 }", Shape{64, 32, 32}, 32,
       "32 x 64x32x32 -> 64, 1x1"},
      {"name: 'attention' causal_self_attention { num_heads: 8 }", Shape{256, 512}, 8,
       "8 x T 256 x d 512, 8 heads"},
      {"name: 'layer_norm' layer_norm {}", Shape{1024}, 256, "256 x 1024", true},
      {"name: 'gelu' gelu {}", Shape{4096}, 256, "256 x 4096", true},
      {"name: 'relu' relu {}", Shape{1024}, 8, "8 x 1024", true},
      {"name: 'relu' relu {}", Shape{1024}, 32, "32 x 1024", true},
      {"name: 'relu' relu {}", Shape{1024}, 256, "256 x 1024", true},
  };
  if (gpu) {
    // Transformer stages at GPT sizes (GPT-2 medium's width and a 2048-wide block): what a
    // pipeline stage of a large model runs per micro-batch.
    cases.push_back({"name: 'block' transformer_block { num_heads: 16 }", Shape{1024, 1024}, 8,
                     "8 x T 1024 x d 1024, 16 heads"});
    cases.push_back({"name: 'block' transformer_block { num_heads: 16 }", Shape{2048, 2048}, 4,
                     "4 x T 2048 x d 2048, 16 heads"});
    // The 2048-wide block's parts, where its time goes.
    cases.push_back({"name: 'attention' causal_self_attention { num_heads: 16 }", Shape{2048, 2048},
                     4, "4 x T 2048 x d 2048, 16 heads (block part)"});
    cases.push_back({"name: 'fc' linear { out_features: 8192 }", Shape{2048, 2048}, 4,
                     "4 x T 2048 x 2048 -> 8192 (block part)"});
    cases.push_back({"name: 'proj' linear { out_features: 2048 }", Shape{2048, 8192}, 4,
                     "4 x T 2048 x 8192 -> 2048 (block part)"});
    cases.push_back(
        {"name: 'ln' layer_norm {}", Shape{2048, 2048}, 4, "4 x T 2048 x 2048 (block part)", true});
    cases.push_back(
        {"name: 'gelu' gelu {}", Shape{2048, 8192}, 4, "4 x T 2048 x 8192 (block part)", true});
  }
  return cases;
}

std::string Millis(double micros) { return absl::StrFormat("%.3f", micros * 1e-3); }

absl::Status BenchLayers(Device& device, const GemmPeak& peak, ProfileClock clock, int repeats,
                         RateUnit unit, const BenchOptions& options, bool gpu) {
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  const bool mfu = options.peak_tflops > 0;
  if (!options.json) {
    std::printf(
        "\n| layer | shape | fwd ms | bwd ms | bwd-input ms | bwd-weight ms | %s | "
        "%% of GEMM peak |%s\n|---|---|---|---|---|---|---|---|%s\n",
        unit.name, mfu ? " MFU |" : "", mfu ? "---|" : "");
  }
  for (const LayerCase& c : LayerCases(gpu, options)) {
    if (!options.only.empty() && !absl::StrContains(c.entry, options.only) &&
        !absl::StrContains(c.shape, options.only)) {
      continue;
    }
    pb::Layer spec;
    if (!google::protobuf::TextFormat::ParseFromString(c.entry, &spec)) {
      return absl::InternalError(absl::StrCat("bad layer entry: ", c.entry));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<Layer> layer, registry.Create(spec, c.input_shape));
    if (options.bf16) layer = std::make_unique<Bf16Layer>(std::move(layer));
    ASSIGN_OR_RETURN(LayerTiming t,
                     ProfileLayer(*layer, device, c.batch, /*layer_index=*/1,
                                  /*need_input_grad=*/true,
                                  ProfileOptions{.repeats = repeats, .warmup = 1, .clock = clock}));
    const double flops = 3.0 * layer->ForwardFlopsPerSample() * static_cast<double>(c.batch);
    const double gflops = flops / ((t.forward_us + t.backward_us) * 1e-6) * 1e-9;
    if (options.json) {
      // The shape strings are ASCII without quotes or backslashes: no escaping needed.
      std::printf(
          "{\"kind\": \"layer\", \"layer\": \"%s\", \"shape\": \"%s\", \"batch\": %lld, "
          "\"precision\": \"%s\", \"repeats\": %d, \"fwd_ms\": %.6g, \"bwd_ms\": %.6g, "
          "\"fwd_bwd_flops\": %.6g, \"gflops\": %.6g, \"gemm_peak_gflops\": %.6g}\n",
          std::string(layer->type()).c_str(), c.shape.c_str(), static_cast<long long>(c.batch),
          options.bf16 ? "bf16" : "fp32", repeats, t.forward_us * 1e-3, t.backward_us * 1e-3, flops,
          gflops, peak.gflops);
      std::fflush(stdout);
      continue;
    }
    std::printf("| %s%s | %s | %s | %s | %s | %s | %.2f | %.0f%% |",
                std::string(layer->type()).c_str(), c.memory_bound ? " (memory-bound)" : "",
                c.shape.c_str(), Millis(t.forward_us).c_str(), Millis(t.backward_us).c_str(),
                t.splits ? Millis(t.backward_input_us).c_str() : "—",
                t.splits ? Millis(t.backward_weight_us).c_str() : "—", gflops * unit.per_gflops,
                100.0 * gflops / peak.gflops);
    if (mfu) std::printf(" %.1f%% |", 100.0 * gflops * 1e-3 / options.peak_tflops);
    std::printf("\n");
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

// The section's heading and its paragraph of conditions.
void PrintIntro(Device& device, const BenchOptions& options, bool cpu, int threads,
                ProfileClock clock, int repeats) {
  const bool quick = options.quick;
  std::printf("## %s kernels against the GEMM peak (%s)\n\n", cpu ? "CPU" : device.name().c_str(),
              options.bf16 ? "bf16 mixed precision" : "fp32");
  std::printf(
      "%s (C = A B, row-major, %s, through the %s device's matmul ops%s) on each "
      "shape, then forward and backward of each layer on random inputs (the layer profiler: "
      "parameters initialized as in training, every input gradient computed, outputs allocated "
      "through the device as in training), each time the median of %d calls after one warm-up, "
      "in %s. Rate = forward FLOPs (ForwardFlopsPerSample) x "
      "batch x 3 / (fwd + bwd time); bwd is the whole Backward, and bwd-input / bwd-weight are "
      "its split halves timed on their own where the layer splits. The peak is the best GEMM "
      "row. layer_norm and gelu are memory-bound references (their FLOPs are nominal).%s%s\n\n",
      options.bf16 ? "GEMM" : "SGEMM",
      options.bf16 ? "A and B rounded to bf16 in a packing pass, f32 accumulation and output, as "
                     "training.precision BF16 runs them; layers wrapped as in that mode"
                   : "fp32",
      device.name().c_str(),
      cpu ? absl::StrCat(", ", threads, threads == 1 ? " thread" : " threads").c_str() : "",
      repeats,
      clock == ProfileClock::kWall ? "wall time"
                                   : "process CPU time (page faults included; other processes "
                                     "sharing the cores do not inflate it)",
      quick ? " Quick run: few repetitions." : "",
      options.peak_tflops > 0
          ? absl::StrFormat(" MFU = rate / %.1f TFLOP/s, the device's nominal peak given by "
                            "--peak-tflops.",
                            options.peak_tflops)
                .c_str()
          : "");
}

// The CUDA options the flags ask for.
pb::Cuda CudaOptions(const KernelBenchArgs& args) {
  pb::Cuda cuda;
  if (args.cublaslt) cuda.set_cublaslt_gemm(true);
  if (args.cudnn_attention) cuda.set_cudnn_attention(true);
  return cuda;
}

absl::Status RunKernelBench(const BenchOptions& options, pb::Device kind, int threads,
                            ProfileClock clock, const pb::Cuda& cuda) {
  const bool quick = options.quick;
  pb::Runtime runtime;
  runtime.set_device(kind);
  runtime.set_threads(threads);
  *runtime.mutable_cuda() = cuda;
  ASSIGN_OR_RETURN(std::unique_ptr<Device> owned, CreateStandaloneDevice(runtime));
  Device& device = *owned;
  const bool cpu = kind == pb::CPU;
  const RateUnit unit = cpu ? RateUnit{} : RateUnit{.name = "TFLOP/s", .per_gflops = 1e-3};
  const int repeats = options.repeats > 0 ? options.repeats : quick ? 2 : 7;
  std::vector<GemmShape> shapes = {{1024, 1024, 1024}, {256, 1024, 1024}};
  if (!quick) {
    shapes = {{512, 512, 512},    {1024, 1024, 1024}, {1536, 1536, 1536},
              {2048, 2048, 2048}, {256, 1024, 1024},  {256, 1024, 4096},
              {2048, 512, 2048},  {512, 2048, 2048},  {2048, 2048, 512}};
    // A GPU reaches its peak only on large products.
    if (!cpu) shapes.insert(shapes.end(), {{4096, 4096, 4096}, {8192, 8192, 8192}});
  }
  if (!options.json) PrintIntro(device, options, cpu, threads, clock, repeats);
  // With --only or --block, the peak is the single 1024^3 product: the rows' percentages are
  // then rough.
  if (!options.only.empty() || options.block) shapes = {{1024, 1024, 1024}};
  ASSIGN_OR_RETURN(GemmPeak peak,
                   MeasureGemmPeak(device, shapes, clock, repeats, unit,
                                   options.bf16 ? ProductPrecision::kBF16 : ProductPrecision::kF32,
                                   options.json));
  if (options.json) return BenchLayers(device, peak, clock, repeats, unit, options, !cpu);
  std::printf("\nGEMM peak: %.1f %s at %lld x %lld x %lld.\n", peak.gflops * unit.per_gflops,
              unit.name,
              static_cast<long long>(peak.shape.m), static_cast<long long>(peak.shape.n),
              static_cast<long long>(peak.shape.k));
  if (options.peak_tflops > 0) {
    std::printf("The best GEMM reaches %.1f%% of the nominal peak.\n",
                100.0 * peak.gflops * 1e-3 / options.peak_tflops);
  }
  return BenchLayers(device, peak, clock, repeats, unit, options, !cpu);
}

absl::Status RunProfile(const std::string& plan_path, const std::vector<std::string>& overrides,
                        const std::string& out_path, int repeats, int threads,
                        ProfileClock clock) {
  // As `gpipe-plan profile`: layers are timed one by one, so a PROFILE balance is not resolved.
  ASSIGN_OR_RETURN(
      const ResolvedPlan resolved,
      ResolvePlan(PlanFile{.path = plan_path}, overrides, LayerRegistry::WithBuiltins(),
                  ResolveOptions{.resolve_profile_balance = false}));
  pb::Runtime runtime;
  runtime.set_threads(threads);
  ASSIGN_OR_RETURN(std::unique_ptr<Device> device, CreateStandaloneDevice(runtime));
  ASSIGN_OR_RETURN(std::string json,
                   ProfileAnalyzedPlanLayers(
                       resolved.analyzed, resolved.registry, *device,
                       ProfileOptions{.repeats = repeats, .threads = threads, .clock = clock}));
  if (out_path.empty()) {
    std::fputs(json.c_str(), stdout);
    return absl::OkStatus();
  }
  return WriteFileAtomically(out_path, json);
}

int Main(int argc, char** argv) {
  absl::StatusOr<KernelBenchArgs> args =
      ParseKernelBenchArgs(std::vector<std::string>(argv + 1, argv + argc));
  if (!args.ok()) {
    std::fprintf(stderr, "gpipe-bench-kernels: %s\n%s",
                 std::string(args.status().message()).c_str(), kKernelBenchUsage);
    return 2;
  }
  if (args->help) {
    std::fputs(kKernelBenchUsage, stdout);
    return 0;
  }
  const absl::Status status = args->profile_plan
                                  ? RunProfile(*args->profile_plan, args->overrides, args->out_path,
                                               args->profile_repeats, args->threads, args->clock)
                                  : RunKernelBench(args->bench, args->device, args->threads,
                                                   args->clock, CudaOptions(*args));
  if (!status.ok()) {
    std::fprintf(stderr, "gpipe-bench-kernels: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace gpipe

int main(int argc, char** argv) { return gpipe::Main(argc, argv); }
