#include "runtime/device/cpu/dnnl_matmul.h"

#include <string>

#include "runtime/device/cpu/dnnl_context.h"

namespace gpipe {

using dnnl::memory;

memory::desc MatrixDesc(memory::data_type type, int64_t batch, int64_t rows, int64_t cols,
                        int64_t row_stride, int64_t col_stride, int64_t batch_stride) {
  if (batch == 1) return memory::desc({rows, cols}, type, memory::dims{row_stride, col_stride});
  return memory::desc({batch, rows, cols}, type,
                      memory::dims{batch_stride, row_stride, col_stride});
}

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

absl::Status SgemmBatches(const SgemmOperand& a, const SgemmOperand& b, float* c, int64_t c_ld,
                          int64_t c_batch_stride, const GemmOptions& options, int64_t m, int64_t n,
                          int64_t k, const std::string& what) {
  const float* bias = options.bias != nullptr ? options.bias->data<float>() : nullptr;
  for (int64_t batch = 0; batch < options.batch; ++batch) {
    float* c_mat = c + batch * c_batch_stride;
    const dnnl_status_t status =
        dnnl_sgemm(options.transpose_a ? 'T' : 'N', options.transpose_b ? 'T' : 'N', m, n, k,
                   options.alpha, a.data + batch * a.batch_stride, a.ld,
                   b.data + batch * b.batch_stride, b.ld, options.beta, c_mat, c_ld);
    if (status != dnnl_success) return DnnlError(dnnl::error(status, "dnnl_sgemm"), what.c_str());
    if (bias == nullptr) continue;
    for (int64_t i = 0; i < m; ++i) {
      float* __restrict row = c_mat + i * c_ld;
      for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
    }
  }
  return absl::OkStatus();
}

}  // namespace gpipe
