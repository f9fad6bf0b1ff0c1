#include "bench/kernels_bench_args.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "launcher/flags.h"
#include "runtime/backend/standalone_device.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

const char kKernelBenchUsage[] =
    "usage: gpipe-bench-kernels [--quick] [--threads N] [--clock cpu|wall] [--device cpu|cuda]\n"
    "                           [--precision fp32|bf16] [--peak-tflops X] [--only TEXT]\n"
    "                           [--block B,T,D,H] [--repeats N] [--json] [--cublaslt]\n"
    "                           [--cudnn-attention]\n"
    "       gpipe-bench-kernels --profile PLAN [-o FILE] [--override TEXT]... [--repeats N]"
    " [--threads N] [--clock cpu|wall]\n"
    "  --quick        fewer repetitions and GEMM shapes (a smoke run)\n"
    "  --precision P  fp32 (default) or bf16: products and layers as training.precision runs them\n"
    "  --peak-tflops X  the device's nominal peak at that precision (e.g. 989 for an H100 SXM in\n"
    "                 bf16): rates are also printed as MFU against it\n"
    "  --only TEXT    only the layer rows whose layer or shape contains TEXT, after one GEMM\n"
    "  --block B,T,D,H  only a transformer_block (D wide, H heads, MLP 4 D) on B samples of T\n"
    "                 positions, after one GEMM; on any device\n"
    "  --json         one JSON object per GEMM and layer row instead of markdown\n"
    "  --cublaslt     with --device cuda: products on cuBLASLt, bias and bf16 rounding in their\n"
    "                 epilogues (runtime.cuda.cublaslt_gemm)\n"
    "  --cudnn-attention  with --device cuda: bf16 storage's fused attention on cuDNN\n"
    "                 (runtime.cuda.cudnn_attention; --precision bf16)\n"
    "  --threads N    the CPU device's compute threads (default 1)\n"
    "  --device D     cpu (default) or cuda (the first GPU; timed on the wall clock after the\n"
    "                 device has finished each call)\n"
    "  --profile PLAN write PLAN's per-layer profile JSON (forward, backward input and weight\n"
    "                 halves, microseconds) to -o FILE, or to stdout\n"
    "  --repeats N    timed calls per phase, the median kept (default 7, 2 with --quick; for\n"
    "                 --profile 5)\n"
    "  --clock C      cpu (default: the process's CPU time, steady where other processes share\n"
    "                 the cores) or wall; for the benchmark and --profile alike\n";

absl::StatusOr<KernelBenchArgs> ParseKernelBenchArgs(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(ParsedFlags flags, ParseFlags({{"help", false},
                                                  {"quick", false},
                                                  {"threads"},
                                                  {"profile"},
                                                  {"o"},
                                                  {"repeats"},
                                                  {"clock"},
                                                  {"device"},
                                                  {"override", true, true},
                                                  {"precision"},
                                                  {"peak-tflops"},
                                                  {"only"},
                                                  {"block"},
                                                  {"json", false},
                                                  {"cublaslt", false},
                                                  {"cudnn-attention", false}},
                                                 args));
  if (!flags.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected positional argument '", flags.positional().front(), "'"));
  }
  KernelBenchArgs parsed;
  if (flags.Has("help")) {
    parsed.help = true;
    return parsed;
  }
  int repeats = 0;
  for (auto [name, target] :
       {std::pair{"threads", &parsed.threads}, std::pair{"repeats", &repeats}}) {
    if (auto value = flags.Get(name)) {
      absl::StatusOr<int64_t> number = ParseIntFlag(absl::StrCat("--", name), *value);
      if (!number.ok() || *number < 1 || *number > 1'000'000) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a whole number in [1, 1000000], got '", *value, "'"));
      }
      *target = static_cast<int>(*number);
    }
  }
  if (const std::string name = flags.Get("clock").value_or("cpu"); name == "wall") {
    parsed.clock = ProfileClock::kWall;
  } else if (name != "cpu") {
    return absl::InvalidArgumentError(absl::StrCat("--clock takes cpu or wall, got '", name, "'"));
  }
  if (auto plan = flags.Get("profile")) {
    parsed.profile_plan = *plan;
    parsed.overrides = flags.GetAll("override");
    parsed.out_path = flags.Get("o").value_or("");
    if (repeats > 0) parsed.profile_repeats = repeats;
    return parsed;
  }
  ASSIGN_OR_RETURN(parsed.device, StandaloneDeviceFromName(flags.Get("device").value_or("cpu")));
  // A GPU's kernels run on its own clock: only wall time, after each call has finished on the
  // device, measures them.
  if (parsed.device != pb::CPU) parsed.clock = ProfileClock::kWall;
  parsed.cublaslt = flags.Has("cublaslt");
  if (parsed.cublaslt && parsed.device != pb::CUDA) {
    return absl::InvalidArgumentError("--cublaslt needs --device cuda");
  }
  parsed.cudnn_attention = flags.Has("cudnn-attention");
  if (parsed.cudnn_attention && parsed.device != pb::CUDA) {
    return absl::InvalidArgumentError("--cudnn-attention needs --device cuda");
  }
  BenchOptions& options = parsed.bench;
  options.quick = flags.Has("quick");
  options.only = flags.Get("only").value_or("");
  options.repeats = repeats;
  options.json = flags.Has("json");
  if (auto block = flags.Get("block")) {
    const std::vector<std::string> parts = absl::StrSplit(*block, ',');
    std::array<int64_t, 4> dims{};
    bool ok = parts.size() == dims.size();
    for (size_t i = 0; ok && i < parts.size(); ++i) {
      ok = absl::SimpleAtoi(parts[i], &dims[i]) && dims[i] >= 1;
    }
    if (!ok || dims[2] % dims[3] != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--block takes B,T,D,H (whole numbers >= 1, H dividing D), got '", *block, "'"));
    }
    options.block = dims;
  }
  if (const std::string precision = flags.Get("precision").value_or("fp32"); precision == "bf16") {
    options.bf16 = true;
  } else if (precision != "fp32") {
    return absl::InvalidArgumentError(
        absl::StrCat("--precision takes fp32 or bf16, got '", precision, "'"));
  }
  if (auto peak = flags.Get("peak-tflops")) {
    if (!absl::SimpleAtod(*peak, &options.peak_tflops) || !(options.peak_tflops > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--peak-tflops needs a number > 0, got '", *peak, "'"));
    }
  }
  return parsed;
}

}  // namespace gpipe
