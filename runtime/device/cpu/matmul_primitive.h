// The oneDNN matmul primitive both CPU product paths build (f32 in CpuMatmulOps, bf16 inputs in
// CpuBf16Gemm): C = alpha A B + beta C (+ bias) over given memory descriptors, alpha as output
// scale, beta as a sum post-op, the bias an f32 row of n. Internal to the CPU backend.
#ifndef GPIPE_RUNTIME_DEVICE_CPU_MATMUL_PRIMITIVE_H_
#define GPIPE_RUNTIME_DEVICE_CPU_MATMUL_PRIMITIVE_H_

#include <cstdint>
#include <optional>

#include "oneapi/dnnl/dnnl.hpp"

namespace gpipe {

// The f32 bias descriptor of n columns for `batch` products (broadcast over rows and batch).
dnnl::memory::desc MatmulBiasDesc(int64_t batch, int64_t n);

// The primitive, or nullopt when oneDNN offers only a reference implementation (far slower than
// sgemm) or cannot express the descriptors at all (e.g. a zero batch stride).
std::optional<dnnl::matmul> MakeMatmulPrimitive(const dnnl::memory::desc& a,
                                                const dnnl::memory::desc& b,
                                                const dnnl::memory::desc& c,
                                                const dnnl::memory::desc* bias, float alpha,
                                                float beta, const dnnl::engine& engine);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_MATMUL_PRIMITIVE_H_
