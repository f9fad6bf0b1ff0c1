#include "runtime/device/cpu/cpu_bf16_gemm.h"

#include <bit>
#include <optional>
#include <string>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "runtime/core/bf16.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cpu/dnnl_matmul.h"

namespace gpipe {
namespace {

using dnnl::memory;

// The stored matrices of `view` (batch x rows x cols), densely packed: f32 values rounded to
// bf16, bf16 values copied as they are.
template <typename T, typename Convert>
void PackRows(const MatrixView& view, int64_t batch, Convert convert, uint16_t* out) {
  const T* base = static_cast<const T*>(view.tensor.raw_data()) + view.offset;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < view.rows; ++i) {
      const T* __restrict row = base + b * view.batch_stride + i * view.ld;
      for (int64_t j = 0; j < view.cols; ++j) *out++ = convert(row[j]);
    }
  }
}
std::vector<uint16_t> Pack(const MatrixView& view, int64_t batch) {
  std::vector<uint16_t> packed(static_cast<size_t>(batch * view.rows * view.cols));
  if (view.tensor.dtype() == DType::kBF16) {
    PackRows<uint16_t>(
        view, batch, [](uint16_t v) { return v; }, packed.data());
  } else {
    PackRows<float>(
        view, batch, [](float v) { return ToBf16(v); }, packed.data());
  }
  return packed;
}

// The logical [batch,] rows x cols matrix over a dense packed copy of stored shape
// stored_rows x stored_cols, transposed or not.
memory::desc PackedDesc(int64_t batch, int64_t stored_rows, int64_t stored_cols, bool transpose) {
  return transpose ? MatrixDesc(memory::data_type::bf16, batch, stored_cols, stored_rows, 1,
                                stored_cols, stored_rows * stored_cols)
                   : MatrixDesc(memory::data_type::bf16, batch, stored_rows, stored_cols,
                                stored_cols, 1, stored_rows * stored_cols);
}

}  // namespace

const CpuBf16Gemm::Cached& CpuBf16Gemm::Lookup(const MatrixView& a, const MatrixView& b,
                                               const MatrixView& c, const GemmOptions& options,
                                               int64_t m, int64_t n, int64_t k) const {
  const int64_t batch = options.batch;
  const std::vector<int64_t> key = {options.transpose_a,
                                    options.transpose_b,
                                    batch,
                                    m,
                                    n,
                                    k,
                                    c.ld,
                                    batch > 1 ? c.batch_stride : 0,
                                    std::bit_cast<int32_t>(options.alpha),
                                    std::bit_cast<int32_t>(options.beta),
                                    options.bias != nullptr,
                                    c.tensor.dtype() == DType::kBF16};
  auto [it, inserted] = cache_.try_emplace(key);
  Cached& cached = it->second;
  if (!inserted) return cached;
  try {
    cached.a = PackedDesc(batch, a.rows, a.cols, options.transpose_a);
    cached.b = PackedDesc(batch, b.rows, b.cols, options.transpose_b);
    cached.c = MatrixDesc(
        c.tensor.dtype() == DType::kBF16 ? memory::data_type::bf16 : memory::data_type::f32, batch,
        m, n, c.ld, 1, c.batch_stride);
  } catch (const dnnl::error&) {
    return cached;
  }
  if (options.bias != nullptr) cached.bias = MatmulBiasDesc(batch, n);
  std::optional<dnnl::matmul> primitive = MakeMatmulPrimitive(
      cached.a, cached.b, cached.c, options.bias != nullptr ? &cached.bias : nullptr, options.alpha,
      options.beta, dnnl_.engine());
  if (primitive.has_value()) {
    cached.primitive = *std::move(primitive);
    cached.native = true;
  }
  return cached;
}

absl::Status CpuBf16Gemm::Run(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                              const GemmOptions& options, int64_t m, int64_t n, int64_t k) const {
  const bool bf16_c = c.tensor.dtype() == DType::kBF16;
  // With alpha != 1 and a bias, oneDNN's output scale may also scale the bias: the f32 path
  // below applies them in the contract's order.
  const bool primitive_expresses = options.bias == nullptr || options.alpha == 1.0f;
  if (k > 0 && primitive_expresses) {
    const Cached& cached = Lookup(a, b, c, options, m, n, k);
    if (cached.native) {
      // oneDNN rounds its f32 result to nearest even into a bf16 C.
      const std::vector<uint16_t> a_packed = Pack(a, options.batch);
      const std::vector<uint16_t> b_packed = Pack(b, options.batch);
      void* c_base =
          bf16_c
              ? static_cast<void*>(static_cast<uint16_t*>(Tensor(c.tensor).raw_data()) + c.offset)
              : static_cast<void*>(static_cast<float*>(Tensor(c.tensor).raw_data()) + c.offset);
      try {
        dnnl::engine& engine = dnnl_.engine();
        memory a_mem(cached.a, engine, const_cast<uint16_t*>(a_packed.data()));
        memory b_mem(cached.b, engine, const_cast<uint16_t*>(b_packed.data()));
        memory c_mem(cached.c, engine, c_base);
        std::unordered_map<int, memory> args = {
            {DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}};
        if (options.bias != nullptr) {
          args.emplace(DNNL_ARG_BIAS, memory(cached.bias, engine,
                                             const_cast<float*>(options.bias->data<float>())));
        }
        cached.primitive.execute(dnnl_.stream(), args);
        dnnl_.stream().wait();
        return absl::OkStatus();
      } catch (const dnnl::error& error) {
        return DnnlError(error, "CpuMatmulOps::Gemm (bf16)");
      }
    }
  }
  // The same arithmetic in f32 on the rounded values, into C, or for a bf16 C into a dense f32
  // result rounded into it afterwards.
  std::vector<float> dense;
  float* out = nullptr;
  int64_t out_ld = c.ld, out_stride = c.batch_stride;
  if (bf16_c) {
    dense.assign(static_cast<size_t>(options.batch * m * n), 0.0f);
    out = dense.data();
    out_ld = n;
    out_stride = m * n;
  } else {
    out = static_cast<float*>(Tensor(c.tensor).raw_data()) + c.offset;
  }
  if (k == 0) {
    // Only a bf16 C comes here with k == 0 (beta is 0): the result is the bias, or zeros.
    if (options.bias != nullptr) {
      const float* bias = options.bias->data<float>();
      for (int64_t r = 0; r < options.batch * m; ++r) {
        for (int64_t j = 0; j < n; ++j) out[r * n + j] = 0.0f + bias[j];  // as an f32 C: -0 -> +0
      }
    }
  } else {
    const std::vector<uint16_t> a_packed = Pack(a, options.batch);
    const std::vector<uint16_t> b_packed = Pack(b, options.batch);
    std::vector<float> a_wide(a_packed.size()), b_wide(b_packed.size());
    for (size_t i = 0; i < a_packed.size(); ++i) a_wide[i] = FromBf16(a_packed[i]);
    for (size_t i = 0; i < b_packed.size(); ++i) b_wide[i] = FromBf16(b_packed[i]);
    RETURN_IF_ERROR(SgemmBatches({a_wide.data(), a.cols, a.rows * a.cols},
                                 {b_wide.data(), b.cols, b.rows * b.cols}, out, out_ld, out_stride,
                                 options, m, n, k, "CpuMatmulOps::Gemm (bf16, f32 path)"));
  }
  if (!bf16_c) return absl::OkStatus();
  auto* base = static_cast<uint16_t*>(Tensor(c.tensor).raw_data()) + c.offset;
  for (int64_t batch = 0; batch < options.batch; ++batch) {
    for (int64_t i = 0; i < m; ++i) {
      const float* __restrict from = dense.data() + (batch * m + i) * n;
      uint16_t* __restrict to = base + batch * c.batch_stride + i * c.ld;
      for (int64_t j = 0; j < n; ++j) to[j] = ToBf16(from[j]);
    }
  }
  return absl::OkStatus();
}

}  // namespace gpipe
