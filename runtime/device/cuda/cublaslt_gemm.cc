#include "runtime/device/cuda/cublaslt_gemm.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/core/tensor.h"
#include "runtime/device/cuda/cuda_status.h"

namespace gpipe::cuda {
namespace {

struct DescDeleter {
  void operator()(cublasLtMatmulDesc_t desc) const { cublasLtMatmulDescDestroy(desc); }
};
struct LayoutDeleter {
  void operator()(cublasLtMatrixLayout_t layout) const { cublasLtMatrixLayoutDestroy(layout); }
};
struct PreferenceDeleter {
  void operator()(cublasLtMatmulPreference_t pref) const { cublasLtMatmulPreferenceDestroy(pref); }
};
using Desc = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>, DescDeleter>;
using Layout = std::unique_ptr<std::remove_pointer_t<cublasLtMatrixLayout_t>, LayoutDeleter>;
using Preference =
    std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, PreferenceDeleter>;

// The largest power of two, up to 256, that divides the address (what cuBLASLt's kernels may
// assume of it).
int64_t AlignmentOf(const void* data) {
  const auto address = reinterpret_cast<uintptr_t>(data);
  if (address == 0) return 256;
  return static_cast<int64_t>(std::min<uintptr_t>(256, address & (~address + 1)));
}

int64_t AlignmentOf(const LtMatrix& m) {
  return m.alignment > 0 ? m.alignment : AlignmentOf(m.data);
}

template <typename T>
absl::Status SetDesc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                     const T& value) {
  GPIPE_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
  return absl::OkStatus();
}

template <typename T>
absl::Status SetPreference(cublasLtMatmulPreference_t pref,
                           cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
  GPIPE_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof(value)));
  return absl::OkStatus();
}

absl::StatusOr<Layout> MakeLayout(const LtMatrix& m, int64_t batch) {
  cublasLtMatrixLayout_t raw = nullptr;
  GPIPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(
      &raw, m.type, static_cast<uint64_t>(m.rows), static_cast<uint64_t>(m.cols), m.ld));
  Layout layout(raw);
  if (batch > 1) {
    const auto count = static_cast<int32_t>(batch);
    GPIPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
        raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    GPIPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
        raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &m.batch_stride, sizeof(m.batch_stride)));
  }
  return layout;
}

}  // namespace

struct CublasLtGemm::Plan {
  Desc desc;
  Layout a;
  Layout b;
  Layout d;  // C and D
  cublasLtMatmulAlgo_t algo{};
  int64_t workspace_bytes = 0;
};

CublasLtGemm::CublasLtGemm(const CudaContext& context) : context_(context) {}
CublasLtGemm::~CublasLtGemm() = default;

int64_t CublasLtGemm::problems_with_algorithm() const {
  return std::count_if(plans_.begin(), plans_.end(),
                       [](const auto& entry) { return entry.second != nullptr; });
}

absl::StatusOr<bool> CublasLtGemm::Run(const LtGemmCall& call) const {
  if (call.batch > std::numeric_limits<int32_t>::max()) return false;
  const Plan* plan = PlanFor(call);
  if (plan == nullptr) return false;
  if (call.bias != nullptr) {
    // The descriptor is the plan's; only the bias address changes from call to call.
    RETURN_IF_ERROR(SetDesc(plan->desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                            static_cast<const void*>(call.bias)));
  }
  Tensor workspace;
  void* workspace_data = nullptr;
  if (plan->workspace_bytes > 0) {
    ASSIGN_OR_RETURN(workspace,
                     Tensor::Empty(*context_.workspace, Shape{(plan->workspace_bytes + 3) / 4},
                                   DType::kF32, MemoryKind::kWorkspace));
    workspace_data = workspace.raw_data();
  }
  void* d = const_cast<void*>(call.d.data);
  GPIPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(
      context_.cublas_lt, plan->desc.get(), &call.alpha, call.a.data, plan->a.get(), call.b.data,
      plan->b.get(), &call.beta, d, plan->d.get(), d, plan->d.get(), &plan->algo, workspace_data,
      static_cast<size_t>(plan->workspace_bytes), context_.stream));
  // `workspace` is freed in stream order, after the product.
  return true;
}

const CublasLtGemm::Plan* CublasLtGemm::PlanFor(const LtGemmCall& call) const {
  Key key{};
  size_t i = 0;
  key[i++] = call.transpose_a;
  key[i++] = call.transpose_b;
  for (const LtMatrix* m : {&call.a, &call.b, &call.d}) {
    key[i++] = m->type;
    key[i++] = m->rows;
    key[i++] = m->cols;
    key[i++] = m->ld;
    key[i++] = call.batch > 1 ? m->batch_stride : 0;
    key[i++] = AlignmentOf(*m);
  }
  key[i++] = call.batch;
  key[i++] = call.compute;
  key[i++] = call.bias != nullptr;
  key[i++] = call.bias != nullptr ? AlignmentOf(call.bias) : 0;
  key[i++] = call.beta != 0.0f;
  static_assert(std::tuple_size_v<Key> == 2 + 3 * 6 + 5);
  if (const auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  // A problem cuBLASLt cannot describe or has no algorithm for is declined, not an error: the
  // caller's other path runs it (and reports any error of its own).
  absl::StatusOr<std::unique_ptr<Plan>> plan = BuildPlan(call);
  return plans_.emplace(key, plan.ok() ? *std::move(plan) : nullptr).first->second.get();
}

absl::StatusOr<std::unique_ptr<CublasLtGemm::Plan>> CublasLtGemm::BuildPlan(
    const LtGemmCall& call) const {
  const bool bf16_output = call.d.type == CUDA_R_16BF;
  // A bf16 output takes the algorithm of the same problem's f32 output (see the header).
  const Plan* wide = nullptr;
  if (bf16_output) {
    if (call.beta != 0.0f) return nullptr;
    LtGemmCall f32_call = call;
    f32_call.d.type = CUDA_R_32F;
    f32_call.d.alignment = std::min<int64_t>(256, 2 * AlignmentOf(call.d));
    wide = PlanFor(f32_call);
    if (wide == nullptr) return nullptr;
  }

  auto plan = std::make_unique<Plan>();
  cublasLtMatmulDesc_t desc = nullptr;
  GPIPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&desc, call.compute, CUDA_R_32F));
  plan->desc.reset(desc);
  RETURN_IF_ERROR(SetDesc(desc, CUBLASLT_MATMUL_DESC_TRANSA, call.transpose_a));
  RETURN_IF_ERROR(SetDesc(desc, CUBLASLT_MATMUL_DESC_TRANSB, call.transpose_b));
  if (call.bias != nullptr) {
    RETURN_IF_ERROR(SetDesc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                            static_cast<cublasLtEpilogue_t>(CUBLASLT_EPILOGUE_BIAS)));
    RETURN_IF_ERROR(
        SetDesc(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(CUDA_R_32F)));
    RETURN_IF_ERROR(
        SetDesc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(call.bias)));
  }
  ASSIGN_OR_RETURN(plan->a, MakeLayout(call.a, call.batch));
  ASSIGN_OR_RETURN(plan->b, MakeLayout(call.b, call.batch));
  ASSIGN_OR_RETURN(plan->d, MakeLayout(call.d, call.batch));

  if (wide != nullptr) {
    cublasLtMatmulHeuristicResult_t checked{};
    const cublasStatus_t status =
        cublasLtMatmulAlgoCheck(context_.cublas_lt, desc, plan->a.get(), plan->b.get(),
                                plan->d.get(), plan->d.get(), &wide->algo, &checked);
    if (status != CUBLAS_STATUS_SUCCESS ||
        static_cast<int64_t>(checked.workspaceSize) > kMaxWorkspaceBytes) {
      return nullptr;
    }
    plan->algo = wide->algo;
    plan->workspace_bytes = static_cast<int64_t>(checked.workspaceSize);
    return plan;
  }

  cublasLtMatmulPreference_t raw_pref = nullptr;
  GPIPE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&raw_pref));
  const Preference pref(raw_pref);
  RETURN_IF_ERROR(SetPreference(raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                static_cast<uint64_t>(kMaxWorkspaceBytes)));
  // Partial sums of a split k meet in f32 before the epilogue, never in the output's type.
  RETURN_IF_ERROR(SetPreference(raw_pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_NONE |
                                                      CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE)));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const LtMatrix*> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &call.a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &call.b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &call.d},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &call.d}};
  for (const auto& [attribute, matrix] : alignments) {
    RETURN_IF_ERROR(
        SetPreference(raw_pref, attribute, static_cast<uint32_t>(AlignmentOf(*matrix))));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(context_.cublas_lt, desc, plan->a.get(), plan->b.get(),
                                     plan->d.get(), plan->d.get(), raw_pref, 1, &result, &returned);
  RETURN_IF_ERROR(CublasStatus(status, "cublasLtMatmulAlgoGetHeuristic"));
  if (returned == 0) return nullptr;
  plan->algo = result.algo;
  plan->workspace_bytes = static_cast<int64_t>(result.workspaceSize);
  return plan;
}

}  // namespace gpipe::cuda
