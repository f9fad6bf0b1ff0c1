// gpipe-bench-cudnn-attention: bf16 storage's fused causal attention, forward + backward, three
// ways on the first GPU, timed with CUDA events on the compute stream (warm-up excluded, median of
// --repeats calls): the CUDA backend's own kernels (cuda_fused_attention.cc), cuDNN with the
// deterministic backward runtime.cuda.cudnn_attention uses, and cuDNN's fastest backward
// (atomics allowed), which is what determinism costs. Prints one markdown table: shape, ms of
// each, TFLOP/s of each (causal FLOPs: forward 2 B H T^2 D, backward 2.5 times that), and the
// deterministic/nondeterministic ratio. Timings are benchmarks, not tests: compare within one run.
//
//   gpipe-bench-cudnn-attention [--repeats N]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_device.h"
#include "runtime/device/cuda/cuda_handles.h"
#include "runtime/device/cuda/cuda_status.h"
#include "runtime/device/cuda/cudnn_attention.h"
#include "runtime/device/ops.h"

namespace gpipe {
namespace {

struct AttentionShape {
  int64_t batch, t, heads, head_dim;
};

// The transformer block of the target (4 x 2048, d 2048 in 16 heads), GPT-2 small's
// attention (12 heads of 64 at T 1024), and a Llama-like 128-wide head at T 4096.
constexpr AttentionShape kShapes[] = {{4, 2048, 16, 128}, {8, 1024, 12, 64}, {1, 4096, 32, 128}};

// The median of `repeats` timed runs of `call` (after one warm-up), in milliseconds.
absl::StatusOr<double> MedianMs(cudaStream_t stream, int repeats,
                                const std::function<absl::Status()>& call) {
  RETURN_IF_ERROR(call());
  // Owned events (released on every return) and every CUDA call checked.
  ASSIGN_OR_RETURN(const cuda::Event start, cuda::CreateEvent(/*timing=*/true));
  ASSIGN_OR_RETURN(const cuda::Event stop, cuda::CreateEvent(/*timing=*/true));
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    GPIPE_CUDA_RETURN_IF_ERROR(cudaEventRecord(start.get(), stream));
    RETURN_IF_ERROR(call());
    GPIPE_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop.get(), stream));
    GPIPE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop.get()));
    float ms = 0;
    GPIPE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

absl::Status Run(int repeats) {
  ASSIGN_OR_RETURN(std::unique_ptr<Device> device, CreateCudaDevice({.ordinal = 0}));
  const cudaStream_t stream = ComputeStreamOf(*device);
  ASSIGN_OR_RETURN(cuda::CudnnHandle cudnn, cuda::CreateCudnn(stream));
  const CudaContext context{
      .ordinal = 0, .stream = stream, .cudnn = cudnn.get(), .workspace = device.get()};
  if (!cuda::CudnnAttention::Available()) {
    return absl::FailedPreconditionError(
        "built without cudnn-frontend (scripts/cudnn_frontend.sh), so there is no cuDNN path");
  }
  const cuda::CudnnAttention deterministic(context, /*deterministic=*/true);
  const cuda::CudnnAttention fastest(context, /*deterministic=*/false);
  std::printf(
      "## bf16 fused causal attention, forward + backward (%s)\n\n"
      "Median of %d calls after one warm-up; TFLOP/s from the causal FLOPs (forward 2 B H T^2 D, "
      "backward 2.5 times that).\n\n"
      "| B x T x H x D | kernels ms | cuDNN det. ms | cuDNN fastest ms | kernels TFLOP/s | "
      "cuDNN det. TFLOP/s | cuDNN fastest TFLOP/s | det. / fastest |\n"
      "|---|---|---|---|---|---|---|---|\n",
      device->name().c_str(), repeats);
  for (const AttentionShape& s : kShapes) {
    const FusedAttentionArgs args{.batch = s.batch,
                                  .t = s.t,
                                  .heads = s.heads,
                                  .head_dim = s.head_dim,
                                  .scale = static_cast<float>(1.0 / std::sqrt(s.head_dim)),
                                  .precision = ProductPrecision::kBF16};
    const int64_t w = s.heads * s.head_dim;
    auto empty = [&](const Shape& shape, DType dtype) {
      return Tensor::Empty(*device, shape, dtype, MemoryKind::kActivation);
    };
    ASSIGN_OR_RETURN(Tensor qkv, empty(Shape{s.batch, s.t, 3 * w}, DType::kBF16));
    ASSIGN_OR_RETURN(Tensor out, empty(Shape{s.batch, s.t, w}, DType::kBF16));
    ASSIGN_OR_RETURN(Tensor dout, empty(Shape{s.batch, s.t, w}, DType::kBF16));
    ASSIGN_OR_RETURN(Tensor dqkv, empty(Shape{s.batch, s.t, 3 * w}, DType::kBF16));
    ASSIGN_OR_RETURN(Tensor lse, empty(Shape{s.batch, s.heads, s.t}, DType::kF32));
    // Small values: the timings do not depend on them, but NaNs could.
    RETURN_IF_ERROR(device->ops().tensor.Fill(qkv, 0.01));
    RETURN_IF_ERROR(device->ops().tensor.Fill(dout, 0.01));
    const AttentionOps& kernels = device->ops().attention;
    ASSIGN_OR_RETURN(const double kernels_ms, MedianMs(stream, repeats, [&] {
                       RETURN_IF_ERROR(kernels.FusedCausalForward(args, qkv, out, lse));
                       return kernels.FusedCausalBackward(args, qkv, out, lse, dout, dqkv);
                     }));
    auto on_cudnn = [&](const cuda::CudnnAttention& attention) {
      return MedianMs(stream, repeats, [&]() -> absl::Status {
        ASSIGN_OR_RETURN(const bool forward, attention.Forward(args, qkv, out, lse));
        ASSIGN_OR_RETURN(const bool backward, attention.Backward(args, qkv, out, lse, dout, dqkv));
        if (!forward || !backward) {
          return absl::UnimplementedError(absl::StrCat(
              "cuDNN declined the ", forward ? "backward" : "forward", " at this shape"));
        }
        return absl::OkStatus();
      });
    };
    absl::StatusOr<double> det_ms = on_cudnn(deterministic);
    absl::StatusOr<double> fast_ms = on_cudnn(fastest);
    const double flops =
        3.5 * 2.0 * s.batch * s.heads * static_cast<double>(s.t) * s.t * s.head_dim;
    auto ms = [](const absl::StatusOr<double>& v) {
      return v.ok() ? absl::StrCat(absl::SixDigits(*v))
                    : absl::StrCat("(", v.status().message(), ")");
    };
    auto rate = [&](const absl::StatusOr<double>& v) {
      return v.ok() ? absl::StrCat(absl::SixDigits(flops / (*v * 1e-3) / 1e12)) : std::string("-");
    };
    const std::string ratio = det_ms.ok() && fast_ms.ok()
                                  ? absl::StrCat(absl::SixDigits(*det_ms / *fast_ms))
                                  : std::string("-");
    std::printf("| %lld x %lld x %lld x %lld | %s | %s | %s | %s | %s | %s | %s |\n",
                static_cast<long long>(s.batch), static_cast<long long>(s.t),
                static_cast<long long>(s.heads), static_cast<long long>(s.head_dim),
                ms(kernels_ms).c_str(), ms(det_ms).c_str(), ms(fast_ms).c_str(),
                rate(kernels_ms).c_str(), rate(det_ms).c_str(), rate(fast_ms).c_str(),
                ratio.c_str());
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace gpipe

int main(int argc, char** argv) {
  constexpr char kUsage[] =
      "usage: gpipe-bench-cudnn-attention [--repeats N]\n"
      "  --repeats N  timed calls per way and shape, the median kept (default 20)\n"
      "  --help       this text\n";
  int repeats = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc && std::atoi(argv[i + 1]) >= 1) {
      repeats = std::atoi(argv[++i]);
    } else {
      std::fputs(kUsage, stderr);
      return 2;
    }
  }
  const absl::Status status = gpipe::Run(repeats);
  if (!status.ok()) {
    std::fprintf(stderr, "gpipe-bench-cudnn-attention: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
