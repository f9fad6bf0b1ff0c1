// CublasLtGemm: matrix products on cuBLASLt with the bias, and a bf16 output's rounding, done in
// the product's epilogue, so neither costs a pass over the output of its own.
//
// Each distinct problem (transposes, every operand's type, shape, leading dimension, batch
// stride and address alignment, the batch, the compute type, whether there is a bias and whether
// C is read) gets its algorithm from cuBLASLt's heuristic once, on first use, and keeps it: a
// given shape always runs the same kernel, so it gives the same bits on every call, whatever the
// stage count or micro-batch. The algorithm's workspace (at most kMaxWorkspaceBytes) is taken
// from the context's stream-ordered workspace for each call, so it is counted as workspace while
// the product runs and no longer. Split-K algorithms are limited to those that sum their
// partial products in the compute type (f32) before the epilogue (no reduction in the output
// buffer), so a bf16 output is rounded once, from the f32 result.
//
// A bf16 output runs the algorithm pinned for the same problem with an f32 output, when
// cuBLASLt accepts it for bf16 (cublasLtMatmulAlgoCheck): the same accumulation and epilogue,
// so the bits of that f32 result rounded to nearest even. Where it does not, Run declines and the
// caller computes the f32 product and rounds it itself. The f32 problem is taken with the
// alignment an f32 output at the same element offset would have (twice the bf16 address's, up
// to 256; exact for storage from the device's pool, which starts every block 256-aligned).
//
// Not thread-safe: one thread issues on a device at a time (the Device contract).
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_CUBLASLT_GEMM_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_CUBLASLT_GEMM_H_

#include <cublasLt.h>
#include <library_types.h>

#include <array>
#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/device/cuda/cuda_context.h"

namespace gpipe::cuda {

// One operand as cuBLASLt sees it: column-major, `rows` x `cols` as stored (before the
// call's transpose), `ld` elements between columns, `batch_stride` elements between matrices.
struct LtMatrix {
  const void* data = nullptr;
  cudaDataType_t type = CUDA_R_32F;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  // The alignment cuBLASLt may assume of `data` in bytes (a power of two up to 256); 0: the
  // largest the address has.
  int64_t alignment = 0;
};

// For each of `batch` matrices: D = alpha op(A) op(B) + beta D + bias, column-major, D is
// d.rows x d.cols. D is also C (read only when beta != 0).
struct LtGemmCall {
  cublasOperation_t transpose_a = CUBLAS_OP_N;
  cublasOperation_t transpose_b = CUBLAS_OP_N;
  LtMatrix a;
  LtMatrix b;
  LtMatrix d;  // f32, or bf16 with beta == 0
  int64_t batch = 1;
  float alpha = 1.0f;
  float beta = 0.0f;
  const float* bias = nullptr;  // f32 [d.rows] added to every column, or null
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};

class CublasLtGemm {
 public:
  // The workspace a pinned algorithm may use.
  static constexpr int64_t kMaxWorkspaceBytes = int64_t{32} << 20;

  // `context` must outlive the object.
  explicit CublasLtGemm(const CudaContext& context);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // Issues the product on the context's stream with the problem's pinned algorithm. false, with
  // nothing issued, when cuBLASLt has no algorithm for the problem (the caller runs it another
  // way; the answer is remembered, so the heuristic is asked once per problem).
  absl::StatusOr<bool> Run(const LtGemmCall& call) const;

  // Problems seen so far, and how many of them have an algorithm.
  int64_t problems() const { return static_cast<int64_t>(plans_.size()); }
  int64_t problems_with_algorithm() const;

 private:
  struct Plan;
  using Key = std::array<int64_t, 25>;
  // The problem's plan, built on first use; null when cuBLASLt offers no algorithm or fails to
  // describe the problem (the reason is not kept: problems_with_algorithm() counts the rest).
  const Plan* PlanFor(const LtGemmCall& call) const;
  absl::StatusOr<std::unique_ptr<Plan>> BuildPlan(const LtGemmCall& call) const;

  const CudaContext& context_;
  mutable absl::flat_hash_map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace gpipe::cuda

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_CUBLASLT_GEMM_H_
