#include "runtime/device/cpu/cpu_attention_ops.h"

#include <algorithm>
#include <cmath>

#include "runtime/device/cpu/cpu_fused_attention.h"

namespace gpipe {

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
  cpu::FusedCausalForward(args, threads_, qkv.data<float>(), out.data<float>(),
                          logsumexp.data<float>());
  return absl::OkStatus();
}

absl::Status CpuAttentionOps::DoFusedCausalBackward(const FusedAttentionArgs& args,
                                                    const Tensor& qkv, const Tensor& out,
                                                    const Tensor& logsumexp, const Tensor& dout,
                                                    Tensor& dqkv) const {
  cpu::FusedCausalBackward(args, threads_, qkv.data<float>(), out.data<float>(),
                           logsumexp.data<float>(), dout.data<float>(), dqkv.data<float>());
  return absl::OkStatus();
}

}  // namespace gpipe
