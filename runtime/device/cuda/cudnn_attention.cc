// CudnnAttention (cudnn_attention.h) on cudnn-frontend's graph API, built where CMake found the
// frontend's headers. Per shape, one frontend graph per direction:
//   forward:  Q, K, V -> sdpa(causal, scale, stats) -> O, Stats
//   backward: Q, K, V, O, dO, Stats -> sdpa_backward(causal, scale, deterministic) -> dQ, dK, dV
// with every tensor described in place: Q, K, V (and dQ, dK, dV) as [batch, heads, t, head_dim]
// views of the packed [batch, t, 3 * heads * head_dim] rows (strides t * 3w, head_dim, 3w, 1 with
// w = heads * head_dim; K and V start w and 2w elements in), O and dO as views of [batch, t, w]
// (strides t * w, head_dim, w, 1) and Stats as the f32 [batch, heads, t] log-sum-exp.
#include "runtime/device/cuda/cudnn_attention.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cudnn_frontend.h"
#include "runtime/core/status_macros.h"

namespace gpipe::cuda {
namespace {

namespace fe = cudnn_frontend;

// The graphs' tensors, named by uid in the variant pack.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kdO, kdQ, kdK, kdV };

// Operands cuDNN's attention engines read and write 16 bytes at a time.
constexpr uintptr_t kAlignment = 16;

absl::Status FrontendStatus(fe::error_t error, const char* step) {
  if (error.is_good()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cudnn attention: ", step, ": ", error.get_message()));
}

bool Aligned(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % kAlignment == 0; }

// A bf16 tensor's elements from element `first` on.
void* Bf16At(const Tensor& tensor, int64_t first) {
  return static_cast<char*>(const_cast<void*>(tensor.raw_data())) + 2 * first;
}

// Q, K, V or their gradients in the packed rows: part 0, 1, 2 of each row.
std::shared_ptr<fe::graph::Tensor_attributes> PackedPart(fe::graph::Graph& graph,
                                                         const FusedAttentionArgs& args,
                                                         const char* name, int64_t uid) {
  const int64_t w = args.heads * args.head_dim;
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim({args.batch, args.heads, args.t, args.head_dim})
                          .set_stride({args.t * 3 * w, args.head_dim, 3 * w, 1}));
}

// O or dO as [batch, t, heads * head_dim] rows.
fe::graph::Tensor_attributes& HeadsLayout(fe::graph::Tensor_attributes& tensor,
                                          const FusedAttentionArgs& args) {
  const int64_t w = args.heads * args.head_dim;
  return tensor.set_dim({args.batch, args.heads, args.t, args.head_dim})
      .set_stride({args.t * w, args.head_dim, w, 1});
}

// The f32 [batch, heads, t] log-sum-exp as cuDNN's [batch, heads, t, 1] statistics.
fe::graph::Tensor_attributes& StatsLayout(fe::graph::Tensor_attributes& tensor,
                                          const FusedAttentionArgs& args) {
  return tensor.set_data_type(fe::DataType_t::FLOAT)
      .set_dim({args.batch, args.heads, args.t, 1})
      .set_stride({args.heads * args.t, args.t, 1, 1});
}

std::shared_ptr<fe::graph::Graph> NewGraph() {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return graph;
}

std::shared_ptr<fe::graph::Graph> ForwardGraph(const FusedAttentionArgs& args) {
  std::shared_ptr<fe::graph::Graph> graph = NewGraph();
  auto q = PackedPart(*graph, args, "q", kQ);
  auto k = PackedPart(*graph, args, "k", kK);
  auto v = PackedPart(*graph, args, "v", kV);
  auto [o, stats] = graph->sdpa(q, k, v,
                                fe::graph::SDPA_attributes()
                                    .set_name("causal_attention")
                                    .set_generate_stats(true)
                                    .set_causal_mask(true)
                                    .set_attn_scale(args.scale));
  HeadsLayout(o->set_output(true).set_uid(kO), args);
  StatsLayout(stats->set_output(true).set_uid(kStats), args);
  return graph;
}

std::shared_ptr<fe::graph::Graph> BackwardGraph(const FusedAttentionArgs& args,
                                                bool deterministic) {
  std::shared_ptr<fe::graph::Graph> graph = NewGraph();
  auto q = PackedPart(*graph, args, "q", kQ);
  auto k = PackedPart(*graph, args, "k", kK);
  auto v = PackedPart(*graph, args, "v", kV);
  auto o =
      graph->tensor(HeadsLayout(fe::graph::Tensor_attributes().set_name("o").set_uid(kO), args));
  auto d_o =
      graph->tensor(HeadsLayout(fe::graph::Tensor_attributes().set_name("do").set_uid(kdO), args));
  auto stats = graph->tensor(
      StatsLayout(fe::graph::Tensor_attributes().set_name("stats").set_uid(kStats), args));
  auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, d_o, stats,
                                           fe::graph::SDPA_backward_attributes()
                                               .set_name("causal_attention_backward")
                                               .set_causal_mask(true)
                                               .set_attn_scale(args.scale)
                                               .set_deterministic_algorithm(deterministic));
  const int64_t w = args.heads * args.head_dim;
  for (auto& [gradient, uid] : {std::pair{dq, kdQ}, std::pair{dk, kdK}, std::pair{dv, kdV}}) {
    gradient->set_output(true)
        .set_uid(uid)
        .set_dim({args.batch, args.heads, args.t, args.head_dim})
        .set_stride({args.t * 3 * w, args.head_dim, 3 * w, 1});
  }
  return graph;
}

}  // namespace

struct CudnnAttention::Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace_bytes = 0;
};

bool CudnnAttention::Available() { return true; }

CudnnAttention::CudnnAttention(const CudaContext& context, bool deterministic)
    : context_(context), deterministic_(deterministic) {}

CudnnAttention::~CudnnAttention() = default;

int64_t CudnnAttention::shapes_with_plan() const {
  int64_t count = 0;
  for (const auto& [key, plan] : plans_) count += plan != nullptr;
  return count;
}

absl::StatusOr<const CudnnAttention::Plan*> CudnnAttention::PlanFor(
    bool backward, const FusedAttentionArgs& args) const {
  uint32_t scale_bits = 0;
  std::memcpy(&scale_bits, &args.scale, sizeof(scale_bits));
  const Key key{backward ? 1 : 0, args.batch, args.t, args.heads, args.head_dim, scale_bits};
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();

  std::shared_ptr<fe::graph::Graph> graph =
      backward ? BackwardGraph(args, deterministic_) : ForwardGraph(args);
  // A graph cuDNN cannot run (a head_dim it has no engine for, a deterministic backward it lacks
  // on this GPU) fails in one of these steps: the shape is declined, not an error. Errors of the
  // GPU or the library itself (out of memory) surface at execute.
  std::unique_ptr<Plan> plan;
  if (graph->validate().is_good() && graph->build_operation_graph(context_.cudnn).is_good() &&
      graph->create_execution_plans({fe::HeurMode_t::A}).is_good() &&
      graph->check_support(context_.cudnn).is_good() &&
      graph->build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE).is_good()) {
    plan = std::make_unique<Plan>();
    RETURN_IF_ERROR(
        FrontendStatus(graph->get_workspace_size(plan->workspace_bytes), "get_workspace_size"));
    plan->graph = std::move(graph);
  }
  const Plan* result = plan.get();
  plans_.emplace(key, std::move(plan));
  return result;
}

absl::Status CudnnAttention::Execute(const Plan& plan, std::unordered_map<int64_t, void*>& pack,
                                     const char* direction) const {
  Tensor workspace;
  void* workspace_data = nullptr;
  if (plan.workspace_bytes > 0) {
    ASSIGN_OR_RETURN(workspace,
                     Tensor::Empty(*context_.workspace, Shape{(plan.workspace_bytes + 3) / 4},
                                   DType::kF32, MemoryKind::kWorkspace));
    workspace_data = workspace.raw_data();
  }
  return FrontendStatus(plan.graph->execute(context_.cudnn, pack, workspace_data), direction);
}

namespace {

// Whether the call is one CudnnAttention takes: kBF16 products on bf16 tensors, 16-byte aligned
// (K and V start heads * head_dim elements apart, so head_dim a multiple of 8 keeps them so).
bool TakesCall(const FusedAttentionArgs& args, std::initializer_list<const Tensor*> tensors) {
  if (args.precision != ProductPrecision::kBF16 || args.head_dim % 8 != 0) return false;
  for (const Tensor* tensor : tensors) {
    if (tensor->dtype() != DType::kBF16 || !Aligned(tensor->raw_data())) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<bool> CudnnAttention::Forward(const FusedAttentionArgs& args, const Tensor& qkv,
                                             Tensor& out, Tensor& logsumexp) const {
  if (!TakesCall(args, {&qkv, &out}) || !Aligned(logsumexp.raw_data())) return false;
  ASSIGN_OR_RETURN(const Plan* plan, PlanFor(/*backward=*/false, args));
  if (plan == nullptr) return false;
  const int64_t w = args.heads * args.head_dim;
  std::unordered_map<int64_t, void*> pack = {
      {kQ, Bf16At(qkv, 0)}, {kK, Bf16At(qkv, w)},           {kV, Bf16At(qkv, 2 * w)},
      {kO, out.raw_data()}, {kStats, logsumexp.raw_data()},
  };
  RETURN_IF_ERROR(Execute(*plan, pack, "forward"));
  return true;
}

absl::StatusOr<bool> CudnnAttention::Backward(const FusedAttentionArgs& args, const Tensor& qkv,
                                              const Tensor& out, const Tensor& logsumexp,
                                              const Tensor& dout, Tensor& dqkv) const {
  if (!TakesCall(args, {&qkv, &out, &dout, &dqkv}) || !Aligned(logsumexp.raw_data())) {
    return false;
  }
  ASSIGN_OR_RETURN(const Plan* plan, PlanFor(/*backward=*/true, args));
  if (plan == nullptr) return false;
  const int64_t w = args.heads * args.head_dim;
  std::unordered_map<int64_t, void*> pack = {
      {kQ, Bf16At(qkv, 0)},       {kK, Bf16At(qkv, w)},
      {kV, Bf16At(qkv, 2 * w)},   {kO, Bf16At(out, 0)},
      {kdO, Bf16At(dout, 0)},     {kStats, const_cast<void*>(logsumexp.raw_data())},
      {kdQ, dqkv.raw_data()},     {kdK, Bf16At(dqkv, w)},
      {kdV, Bf16At(dqkv, 2 * w)},
  };
  RETURN_IF_ERROR(Execute(*plan, pack, "backward"));
  return true;
}

}  // namespace gpipe::cuda
