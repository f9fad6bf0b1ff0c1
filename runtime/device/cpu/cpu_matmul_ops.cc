#include "runtime/device/cpu/cpu_matmul_ops.h"

#include <bit>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/device/cpu/dnnl_matmul.h"

namespace gpipe {
namespace {

using dnnl::memory;

constexpr char kOp[] = "CpuMatmulOps::Gemm";

// Whether dnnl_sgemm beats the matmul primitive here. Measured single-threaded (AVX-512,
// GFLOP/s primitive vs sgemm, two runs on a shared machine): C[m, 1024] = A[m, 1024] B with B
// [1024, 1024] transposed (a dense forward): m = 8 30/26, 21/16; m = 32 60/49, 48/38; m = 256
// 105/95, 74/64: the primitive wins. B plain (a dense input gradient): m = 8 19/53, 14/34;
// m = 32 55/72, 40/51; m = 256 95/94, 60/64: sgemm wins or ties. A^T B with beta 1 (a weight
// gradient, [1024, rows] x [rows, 1024]): rows = 32 96/137, 43/49; rows = 256 146/161, 64/74:
// sgemm wins. So only products with B transposed take the primitive.
bool PreferSgemm(const GemmOptions& options) { return !options.transpose_b; }

const float* ConstData(const MatrixView& view) {
  return static_cast<const float*>(view.tensor.raw_data()) + view.offset;
}

float* MutableData(const MatrixView& view) {
  Tensor shared = view.tensor;  // shares the storage; C is the op's output
  return static_cast<float*>(shared.raw_data()) + view.offset;
}

// An f32 descriptor (see MatrixDesc).
memory::desc Desc(int64_t batch, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride,
                  int64_t batch_stride) {
  return MatrixDesc(memory::data_type::f32, batch, rows, cols, row_stride, col_stride,
                    batch_stride);
}

std::string Describe(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                     const GemmOptions& options) {
  return absl::StrCat(kOp, " (A ", MatrixViewString(a), options.transpose_a ? "^T" : "", ", B ",
                      MatrixViewString(b), options.transpose_b ? "^T" : "", ", C ",
                      MatrixViewString(c), ", batch ", options.batch, ")");
}

// C = beta C (+ bias) for k == 0, where no product contributes.
void ScaleAndAddBias(const MatrixView& c, const GemmOptions& options) {
  float* base = MutableData(c);
  const float* bias = options.bias != nullptr ? options.bias->data<float>() : nullptr;
  for (int64_t b = 0; b < options.batch; ++b) {
    for (int64_t i = 0; i < c.rows; ++i) {
      float* __restrict row = base + b * c.batch_stride + i * c.ld;
      for (int64_t j = 0; j < c.cols; ++j) {
        const float scaled = options.beta == 0.0f ? 0.0f : options.beta * row[j];
        row[j] = bias != nullptr ? scaled + bias[j] : scaled;
      }
    }
  }
}

}  // namespace

absl::Status CpuMatmulOps::DoGemm(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                                  const GemmOptions& options) const {
  const int64_t m = c.rows;
  const int64_t n = c.cols;
  const int64_t k = options.transpose_a ? a.rows : a.cols;
  if (options.batch == 0 || m == 0 || n == 0) return absl::OkStatus();
  if (options.precision == ProductPrecision::kBF16 && c.tensor.dtype() == DType::kBF16) {
    return bf16_.Run(a, b, c, options, m, n, k);  // k may be 0
  }
  if (k == 0) {
    ScaleAndAddBias(c, options);
    return absl::OkStatus();
  }
  if (options.precision == ProductPrecision::kBF16) return bf16_.Run(a, b, c, options, m, n, k);
  // With alpha != 1 and a bias, whether oneDNN scales the bias too is an implementation detail
  // of its output scales; the sgemm path applies them in the contract's order instead.
  const bool primitive_expresses = options.bias == nullptr || options.alpha == 1.0f;
  if (primitive_expresses && !PreferSgemm(options)) {
    const bool batched = options.batch > 1;
    const std::vector<int64_t> key = {options.transpose_a,
                                      options.transpose_b,
                                      options.batch,
                                      m,
                                      n,
                                      k,
                                      a.ld,
                                      batched ? a.batch_stride : 0,
                                      b.ld,
                                      batched ? b.batch_stride : 0,
                                      c.ld,
                                      batched ? c.batch_stride : 0,
                                      std::bit_cast<int32_t>(options.alpha),
                                      std::bit_cast<int32_t>(options.beta),
                                      options.bias != nullptr};
    const Cached& cached = Lookup(key, a, b, c, options, m, n, k);
    if (cached.usable) return RunPrimitive(cached, a, b, c, options);
  }
  return RunSgemm(a, b, c, options, m, n, k);
}

const CpuMatmulOps::Cached& CpuMatmulOps::Lookup(const std::vector<int64_t>& key,
                                                 const MatrixView& a, const MatrixView& b,
                                                 const MatrixView& c, const GemmOptions& options,
                                                 int64_t m, int64_t n, int64_t k) const {
  auto [it, inserted] = cache_.try_emplace(key);
  Cached& cached = it->second;
  if (!inserted) return cached;
  const int64_t batch = options.batch;
  try {
    cached.a = options.transpose_a ? Desc(batch, m, k, 1, a.ld, a.batch_stride)
                                   : Desc(batch, m, k, a.ld, 1, a.batch_stride);
    cached.b = options.transpose_b ? Desc(batch, k, n, 1, b.ld, b.batch_stride)
                                   : Desc(batch, k, n, b.ld, 1, b.batch_stride);
    cached.c = Desc(batch, m, n, c.ld, 1, c.batch_stride);
  } catch (const dnnl::error&) {
    return cached;  // strides oneDNN cannot describe: sgemm serves them
  }
  if (options.bias != nullptr) cached.bias = MatmulBiasDesc(batch, n);
  // A reference implementation or none at all: sgemm serves these strides.
  std::optional<dnnl::matmul> primitive = MakeMatmulPrimitive(
      cached.a, cached.b, cached.c, options.bias != nullptr ? &cached.bias : nullptr, options.alpha,
      options.beta, dnnl_.engine());
  if (primitive.has_value()) {
    cached.primitive = *std::move(primitive);
    cached.usable = true;
  }
  return cached;
}

absl::Status CpuMatmulOps::RunPrimitive(const Cached& cached, const MatrixView& a,
                                        const MatrixView& b, const MatrixView& c,
                                        const GemmOptions& options) const {
  try {
    dnnl::engine& engine = dnnl_.engine();
    memory a_mem(cached.a, engine, const_cast<float*>(ConstData(a)));
    memory b_mem(cached.b, engine, const_cast<float*>(ConstData(b)));
    memory c_mem(cached.c, engine, MutableData(c));
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}};
    if (options.bias != nullptr) {
      args.emplace(DNNL_ARG_BIAS,
                   memory(cached.bias, engine, const_cast<float*>(options.bias->data<float>())));
    }
    cached.primitive.execute(dnnl_.stream(), args);
    dnnl_.stream().wait();
  } catch (const dnnl::error& error) {
    return DnnlError(error, Describe(a, b, c, options).c_str());
  }
  return absl::OkStatus();
}

absl::Status CpuMatmulOps::RunSgemm(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                                    const GemmOptions& options, int64_t m, int64_t n,
                                    int64_t k) const {
  return SgemmBatches({ConstData(a), a.ld, a.batch_stride}, {ConstData(b), b.ld, b.batch_stride},
                      MutableData(c), c.ld, c.batch_stride, options, m, n, k,
                      Describe(a, b, c, options));
}

}  // namespace gpipe
