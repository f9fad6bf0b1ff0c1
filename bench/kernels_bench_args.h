// gpipe-bench-kernels' command line: what a run measures and how its flags parse.
#ifndef GPIPE_BENCH_KERNELS_BENCH_ARGS_H_
#define GPIPE_BENCH_KERNELS_BENCH_ARGS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/estimate/layer_profiler.h"

namespace gpipe {

// The usage text printed by --help and after a flag error.
extern const char kKernelBenchUsage[];

// What a kernel benchmark run measures.
struct BenchOptions {
  bool quick = false;
  // Products at ProductPrecision::kBF16 and layers run as under training.precision BF16
  // (Bf16Layer); otherwise fp32.
  bool bf16 = false;
  // The device's nominal peak for the precision in TFLOP/s (0: unknown): rates are then also
  // printed as model FLOPs utilization against it.
  double peak_tflops = 0;
  // Only the layer rows whose layer type or shape contains this text, after a single GEMM (for
  // profiling one layer under a profiler); empty: everything.
  std::string only;
  // Timed calls per GEMM and layer phase (0: 7, or 2 when quick).
  int repeats = 0;
  // Rows as JSON lines instead of the markdown section.
  bool json = false;
  // When set, the only layer row: a transformer_block of this shape (after a single GEMM).
  std::optional<std::array<int64_t, 4>> block;  // B, T, D, heads
};

// A parsed command line: either --profile PLAN (writes the plan's layer profile) or the kernel
// benchmark on `device`.
struct KernelBenchArgs {
  bool help = false;
  // Set with --profile: the plan, its overrides and where the profile goes (empty: stdout).
  std::optional<std::string> profile_plan;
  std::vector<std::string> overrides;
  std::string out_path;
  pb::Device device = pb::CPU;
  int threads = 1;
  int profile_repeats = 5;  // --repeats for --profile
  // The process's CPU time unless --clock wall; always wall on a GPU.
  ProfileClock clock = ProfileClock::kProcessCpu;
  // --cublaslt: the CUDA device's products on cuBLASLt (runtime.cuda.cublaslt_gemm).
  bool cublaslt = false;
  // --cudnn-attention: bf16 storage's fused attention on cuDNN (runtime.cuda.cudnn_attention).
  bool cudnn_attention = false;
  BenchOptions bench;
};

// Parses the arguments after the program name; INVALID_ARGUMENT names the flag and its value.
absl::StatusOr<KernelBenchArgs> ParseKernelBenchArgs(const std::vector<std::string>& args);

}  // namespace gpipe

#endif  // GPIPE_BENCH_KERNELS_BENCH_ARGS_H_
