#include "runtime/device/cpu/cpu_attention_ops.h"

#include <algorithm>
#include <cmath>

#include "runtime/core/bf16.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cpu/cpu_fused_attention.h"

namespace gpipe {
namespace {

// The fused attention's per-thread tiles (cpu_fused_attention.h) for the threads that get a
// (sample, head) pair, as workspace tensors: the device's tracker counts them, and they are
// freed when the call returns.
struct FusedScratch {
  static absl::StatusOr<FusedScratch> Allocate(Allocator& workspace, int threads,
                                               int64_t head_dim) {
    FusedScratch scratch;
    ASSIGN_OR_RETURN(scratch.floats,
                     Tensor::Empty(workspace, Shape{threads * cpu::ScratchFloats(head_dim)},
                                   DType::kF32, MemoryKind::kWorkspace));
    ASSIGN_OR_RETURN(scratch.doubles,
                     Tensor::Empty(workspace, Shape{threads * cpu::kScratchDoubles}, DType::kF64,
                                   MemoryKind::kWorkspace));
    return scratch;
  }
  cpu::Scratch view() {
    return {.floats = floats.data<float>(), .doubles = doubles.data<double>()};
  }

  Tensor floats;
  Tensor doubles;
};

// Threads with a pair to compute (none idle), >= 1 for a non-empty call.
int BusyThreads(const FusedAttentionArgs& args, int threads) {
  return static_cast<int>(std::min<int64_t>(threads, args.batch * args.heads));
}

}  // namespace

absl::Status CpuAttentionOps::DoCausalSoftmaxForward(int64_t blocks, int64_t t,
                                                     Tensor& scores) const {
  float* base = scores.data<float>();
  for (int64_t r = 0; r < blocks * t; ++r) {
    float* __restrict row = base + r * t;
    const int64_t len = r % t + 1;  // causal: row i of a block sees columns 0..i
    const float max = *std::max_element(row, row + len);
    double sum = 0.0;
    for (int64_t s = 0; s < len; ++s) {
      row[s] = std::exp(row[s] - max);
      sum += row[s];
    }
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (int64_t s = 0; s < len; ++s) row[s] *= inv_sum;
    std::fill(row + len, row + t, 0.0f);
  }
  return absl::OkStatus();
}

absl::Status CpuAttentionOps::DoCausalSoftmaxBackward(int64_t blocks, int64_t t, float scale,
                                                      const Tensor& probs, Tensor& grad) const {
  const float* p_base = probs.data<float>();
  float* g_base = grad.data<float>();
  for (int64_t r = 0; r < blocks * t; ++r) {
    const float* __restrict p_row = p_base + r * t;
    float* __restrict row = g_base + r * t;
    const int64_t len = r % t + 1;
    double dot = 0.0;
    for (int64_t s = 0; s < len; ++s) dot += static_cast<double>(row[s]) * p_row[s];
    const float dot_f = static_cast<float>(dot);
    for (int64_t s = 0; s < len; ++s) row[s] = scale * p_row[s] * (row[s] - dot_f);
    std::fill(row + len, row + t, 0.0f);
  }
  return absl::OkStatus();
}

absl::Status CpuAttentionOps::DoFusedCausalForward(const FusedAttentionArgs& args,
                                                   const Tensor& qkv, Tensor& out,
                                                   Tensor& logsumexp) const {
  if (args.batch == 0 || args.t == 0) return absl::OkStatus();
  const int threads = BusyThreads(args, threads_);
  ASSIGN_OR_RETURN(FusedScratch scratch,
                   FusedScratch::Allocate(workspace_, threads, args.head_dim));
  cpu::FusedCausalForward(args, threads, scratch.view(), qkv, out, logsumexp.data<float>());
  return absl::OkStatus();
}

absl::Status CpuAttentionOps::DoFusedCausalBackward(const FusedAttentionArgs& args,
                                                    const Tensor& qkv, const Tensor& out,
                                                    const Tensor& logsumexp, const Tensor& dout,
                                                    Tensor& dqkv) const {
  if (args.batch == 0 || args.t == 0) return absl::OkStatus();
  const int threads = BusyThreads(args, threads_);
  ASSIGN_OR_RETURN(FusedScratch scratch,
                   FusedScratch::Allocate(workspace_, threads, args.head_dim));
  // dq sums over key tiles in f32: a bf16 dqkv gets the f32 result rounded once.
  Tensor wide = dqkv;
  if (dqkv.dtype() == DType::kBF16) {
    ASSIGN_OR_RETURN(wide,
                     Tensor::Empty(workspace_, dqkv.shape(), DType::kF32, MemoryKind::kWorkspace));
  }
  cpu::FusedCausalBackward(args, threads, scratch.view(), qkv, out, logsumexp.data<float>(), dout,
                           wide.data<float>());
  if (dqkv.dtype() == DType::kBF16) {
    const float* from = wide.data<float>();
    auto* to = static_cast<uint16_t*>(dqkv.raw_data());
    const int64_t n = dqkv.num_elements();
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t i = 0; i < n; ++i) to[i] = ToBf16(from[i]);
  }
  return absl::OkStatus();
}

}  // namespace gpipe
