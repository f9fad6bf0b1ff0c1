#include "runtime/device/cpu/matmul_primitive.h"

#include <string>

namespace gpipe {

using dnnl::memory;

memory::desc MatmulBiasDesc(int64_t batch, int64_t n) {
  return batch == 1 ? memory::desc({1, n}, memory::data_type::f32, memory::dims{n, 1})
                    : memory::desc({1, 1, n}, memory::data_type::f32, memory::dims{n, n, 1});
}

std::optional<dnnl::matmul> MakeMatmulPrimitive(const memory::desc& a, const memory::desc& b,
                                                const memory::desc& c, const memory::desc* bias,
                                                float alpha, float beta,
                                                const dnnl::engine& engine) {
  try {
    dnnl::primitive_attr attr;
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    if (beta != 0.0f) {
      dnnl::post_ops post_ops;
      post_ops.append_sum(beta);
      attr.set_post_ops(post_ops);
    }
    const dnnl::matmul::desc desc =
        bias != nullptr ? dnnl::matmul::desc(a, b, *bias, c) : dnnl::matmul::desc(a, b, c);
    dnnl::matmul::primitive_desc pd(desc, attr, engine);
    if (std::string(pd.impl_info_str()).starts_with("ref")) return std::nullopt;
    return dnnl::matmul(pd);
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

}  // namespace gpipe
