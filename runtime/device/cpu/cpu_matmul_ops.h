// CpuMatmulOps: the CPU backend's MatmulOps (contracts in runtime/device/ops/matmul_ops.h) on
// oneDNN. Products with B transposed (dense forwards, attention scores) run as a matmul
// primitive with the bias fused, one per shape (sizes, strides, transposes, alpha, beta, bias),
// built on first use and cached; the rest, where dnnl_sgemm measured faster, and shapes the
// primitive cannot express or only serves with a reference implementation, run as dnnl_sgemm
// per batch entry. The path depends only on the shape, so results are deterministic for fixed
// shapes and thread count. Products at ProductPrecision::kBF16 go to CpuBf16Gemm.
#ifndef GPIPE_RUNTIME_DEVICE_CPU_CPU_MATMUL_OPS_H_
#define GPIPE_RUNTIME_DEVICE_CPU_CPU_MATMUL_OPS_H_

#include <cstdint>
#include <map>
#include <vector>

#include "runtime/device/cpu/cpu_bf16_gemm.h"
#include "runtime/device/cpu/dnnl_context.h"
#include "runtime/device/ops/matmul_ops.h"

namespace gpipe {

class CpuMatmulOps final : public MatmulOps {
 public:
  explicit CpuMatmulOps(DnnlContext& dnnl) : dnnl_(dnnl), bf16_(dnnl) {}

 private:
  absl::Status DoGemm(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                      const GemmOptions& options) const override;

  // One product shape's primitive and its memory descriptors (data handles set per call);
  // `usable` is false when oneDNN only offers a reference implementation or none at all.
  struct Cached {
    bool usable = false;
    dnnl::matmul primitive;
    dnnl::memory::desc a, b, c, bias;
  };

  // The primitive for this shape, created on first use. `key` identifies the shape.
  const Cached& Lookup(const std::vector<int64_t>& key, const MatrixView& a, const MatrixView& b,
                       const MatrixView& c, const GemmOptions& options, int64_t m, int64_t n,
                       int64_t k) const;
  absl::Status RunPrimitive(const Cached& cached, const MatrixView& a, const MatrixView& b,
                            const MatrixView& c, const GemmOptions& options) const;
  absl::Status RunSgemm(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                        const GemmOptions& options, int64_t m, int64_t n, int64_t k) const;

  DnnlContext& dnnl_;
  CpuBf16Gemm bf16_;  // ProductPrecision::kBF16
  // Ops are used by one thread at a time (Device's contract), so a plain mutable cache is safe.
  mutable std::map<std::vector<int64_t>, Cached> cache_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_CPU_MATMUL_OPS_H_
