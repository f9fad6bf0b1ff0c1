// CpuBf16Gemm: the CPU backend's products at ProductPrecision::kBF16 on oneDNN's bf16 matmul
// (native bf16 dot products on CPUs with AVX512_BF16 or AMX, f32 accumulation). A and B are packed
// into dense bf16 copies (f32 views rounded to nearest even, bf16 views copied as they are; the
// views' strides and transposes become the copies' memory descriptors), the bias stays f32, and C
// is f32 or bf16 (oneDNN rounds its f32 result into a bf16 destination).
// One primitive per shape, built on first use and cached. Where oneDNN offers only a reference
// implementation, the same arithmetic runs as f32 dnnl_sgemm on the rounded values (a product of
// two bf16 values is exact in f32). Used by CpuMatmulOps after its checks; one thread at a time,
// like every op.
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_BF16_GEMM_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_BF16_GEMM_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "runtime/device/cpu/dnnl_context.h"
#include "runtime/device/ops/matmul_ops.h"

namespace gpipe {

class CpuBf16Gemm {
 public:
  explicit CpuBf16Gemm(DnnlContext& dnnl) : dnnl_(dnnl) {}

  // C = alpha op(bf16(A)) op(bf16(B)) + beta C (+ bias) for views already checked
  // (ValidateGemm) with m, n >= 1 and batch >= 1; k >= 1, or k == 0 for a bf16 C (beta == 0: the
  // bias or zeros, rounded).
  absl::Status Run(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                   const GemmOptions& options, int64_t m, int64_t n, int64_t k) const;

 private:
  struct Cached {
    bool native = false;  // false: oneDNN has only a reference bf16 matmul here
    dnnl::matmul primitive;
    dnnl::memory::desc a, b, c, bias;
  };
  const Cached& Lookup(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                       const GemmOptions& options, int64_t m, int64_t n, int64_t k) const;

  DnnlContext& dnnl_;
  mutable std::map<std::vector<int64_t>, Cached> cache_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_BF16_GEMM_H_
