// The CPU backend's fused causal attention (AttentionOps::FusedCausalForward/Backward, contracts
// in runtime/device/ops/attention_ops.h): FlashAttention-2's tiling on the host. Per (sample,
// head), query tiles of kQueryTile rows meet key tiles of kKeyTile columns; tiles wholly above
// the diagonal are skipped. Forward keeps a running maximum (f32) and denominator (double) per
// query row and rescales its f32 output accumulator when the maximum grows; backward rebuilds
// P = exp(score - logsumexp) per tile and accumulates dk and dv per key tile and dq into its
// output rows, key tile after key tile. The tile products are single-threaded dnnl_sgemm calls
// on packed tiles (f32 accumulation, one fixed order for a tile shape), so results are the same
// bits run to run, whatever the thread count or how a batch is split: (sample, head) pairs are
// independent and run whole on one thread. Workspace is a few tiles per thread, never [t, t],
// from the caller (the device's workspace allocator, so its memory tracker counts it).
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_FUSED_ATTENTION_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_FUSED_ATTENTION_H_

#include <cstdint>

#include "runtime/core/tensor.h"
#include "runtime/device/ops/attention_ops.h"

namespace gpipe::cpu {

inline constexpr int64_t kQueryTile = 64;
inline constexpr int64_t kKeyTile = 64;

// The calls' scratch: per thread, ScratchFloats(head_dim) floats and kScratchDoubles doubles,
// thread after thread, 64-byte aligned. Its contents on entry do not matter.
inline constexpr int64_t kScratchDoubles = kQueryTile;
int64_t ScratchFloats(int64_t head_dim);
struct Scratch {
  float* floats = nullptr;    // threads * ScratchFloats(head_dim)
  double* doubles = nullptr;  // threads * kScratchDoubles
};

// Arguments checked by AttentionOps' entries; `threads` >= 1 share the (sample, head) pairs.
// qkv, out and dout are f32 or (at ProductPrecision::kBF16) bf16 tensors, read as their exact
// f32 widening; Forward's bf16 `out` gets each f32 result rounded to nearest even. logsumexp and
// dqkv are f32.
void FusedCausalForward(const FusedAttentionArgs& args, int threads, const Scratch& scratch,
                        const Tensor& qkv, Tensor& out, float* logsumexp);
void FusedCausalBackward(const FusedAttentionArgs& args, int threads, const Scratch& scratch,
                         const Tensor& qkv, const Tensor& out, const float* logsumexp,
                         const Tensor& dout, float* dqkv);

}  // namespace gpipe::cpu

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_FUSED_ATTENTION_H_
