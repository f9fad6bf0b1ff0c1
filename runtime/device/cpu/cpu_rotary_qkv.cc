// CpuAttentionOps: packing Llama's q, k, v into the fused attention's qkv with rotary position
// embedding and repeated key/value heads, and the transpose for the gradients.
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/core/bf16.h"
#include "runtime/device/cpu/cpu_attention_ops.h"

namespace gpipe {
namespace {

// cos and sin of position s's angle for every pair i < head_dim / 2, [t, head_dim / 2] each,
// computed as RotaryQkvArgs says.
struct RotaryTable {
  explicit RotaryTable(const RotaryQkvArgs& args) : half(args.head_dim / 2) {
    cos.resize(args.t * half);
    sin.resize(args.t * half);
    for (int64_t i = 0; i < half; ++i) {
      const float exponent = static_cast<float>(2 * i) / static_cast<float>(args.head_dim);
      const float inv_freq = 1.0f / std::pow(static_cast<float>(args.rope_theta), exponent);
      for (int64_t s = 0; s < args.t; ++s) {
        const float angle = static_cast<float>(s) * inv_freq;
        cos[s * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
        sin[s * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
      }
    }
  }
  int64_t half;
  std::vector<float> cos;
  std::vector<float> sin;
};

// out = x rotated by +angle (forward) or -angle (the transpose), one head of head_dim values.
void Rotate(const float* __restrict x, const float* __restrict c, const float* __restrict s,
            int64_t half, bool inverse, float* __restrict out) {
  const float sign = inverse ? -1.0f : 1.0f;
  for (int64_t i = 0; i < half; ++i) {
    const float sn = sign * s[i];
    out[i] = x[i] * c[i] - x[i + half] * sn;
    out[i + half] = x[i + half] * c[i] + x[i] * sn;
  }
}

}  // namespace

absl::Status CpuAttentionOps::DoPackRotaryQkv(const RotaryQkvArgs& args, const Tensor& q,
                                              const Tensor& k, const Tensor& v, Tensor& qkv) const {
  const RotaryTable table(args);
  const int64_t d = args.head_dim;
  const int64_t width = args.heads * d;
  const int64_t kv_width = args.kv_heads * d;
  const int64_t group = args.heads / args.kv_heads;
  std::vector<float> rotated_k(d);
  // A bf16 qkv gets each row built in f32 and rounded.
  const bool bf16 = qkv.dtype() == DType::kBF16;
  std::vector<float> row_values(bf16 ? 3 * width : 0);
  for (int64_t row = 0; row < args.batch * args.t; ++row) {
    const int64_t s = row % args.t;
    const float* c = table.cos.data() + s * table.half;
    const float* sn = table.sin.data() + s * table.half;
    const float* qr = q.f32() + row * width;
    const float* kr = k.f32() + row * kv_width;
    const float* vr = v.f32() + row * kv_width;
    float* out = bf16 ? row_values.data() : qkv.f32() + row * 3 * width;
    for (int64_t h = 0; h < args.heads; ++h) {
      Rotate(qr + h * d, c, sn, table.half, /*inverse=*/false, out + h * d);
    }
    for (int64_t g = 0; g < args.kv_heads; ++g) {
      Rotate(kr + g * d, c, sn, table.half, /*inverse=*/false, rotated_k.data());
      for (int64_t j = 0; j < group; ++j) {
        const int64_t h = g * group + j;
        for (int64_t i = 0; i < d; ++i) {
          out[width + h * d + i] = rotated_k[i];
          out[2 * width + h * d + i] = vr[g * d + i];
        }
      }
    }
    if (bf16) {
      uint16_t* to = static_cast<uint16_t*>(qkv.raw_data()) + row * 3 * width;
      for (int64_t i = 0; i < 3 * width; ++i) to[i] = ToBf16(row_values[i]);
    }
  }
  return absl::OkStatus();
}

absl::Status CpuAttentionOps::DoUnpackRotaryQkvGrad(const RotaryQkvArgs& args, const Tensor& dqkv,
                                                    Tensor& dq, Tensor& dk, Tensor& dv) const {
  const RotaryTable table(args);
  const int64_t d = args.head_dim;
  const int64_t width = args.heads * d;
  const int64_t kv_width = args.kv_heads * d;
  const int64_t group = args.heads / args.kv_heads;
  std::vector<float> sum_k(d);
  // A bf16 dqkv is widened a row at a time.
  const bool bf16 = dqkv.dtype() == DType::kBF16;
  std::vector<float> row_values(bf16 ? 3 * width : 0);
  for (int64_t row = 0; row < args.batch * args.t; ++row) {
    const int64_t s = row % args.t;
    const float* c = table.cos.data() + s * table.half;
    const float* sn = table.sin.data() + s * table.half;
    const float* in = nullptr;
    if (bf16) {
      const uint16_t* from = static_cast<const uint16_t*>(dqkv.raw_data()) + row * 3 * width;
      for (int64_t i = 0; i < 3 * width; ++i) row_values[i] = FromBf16(from[i]);
      in = row_values.data();
    } else {
      in = dqkv.f32() + row * 3 * width;
    }
    float* dqr = dq.f32() + row * width;
    float* dkr = dk.f32() + row * kv_width;
    float* dvr = dv.f32() + row * kv_width;
    for (int64_t h = 0; h < args.heads; ++h) {
      Rotate(in + h * d, c, sn, table.half, /*inverse=*/true, dqr + h * d);
    }
    // The group's query heads in order, summed in f32, then rotated back once (rotation is
    // linear, so this is the sum of the rotated gradients up to rounding).
    for (int64_t g = 0; g < args.kv_heads; ++g) {
      for (int64_t i = 0; i < d; ++i) {
        float k_sum = 0.0f;
        float v_sum = 0.0f;
        for (int64_t j = 0; j < group; ++j) {
          const int64_t h = g * group + j;
          k_sum += in[width + h * d + i];
          v_sum += in[2 * width + h * d + i];
        }
        sum_k[i] = k_sum;
        dvr[g * d + i] = v_sum;
      }
      Rotate(sum_k.data(), c, sn, table.half, /*inverse=*/true, dkr + g * d);
    }
  }
  return absl::OkStatus();
}

}  // namespace gpipe
