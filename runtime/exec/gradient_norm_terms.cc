#include "runtime/exec/gradient_norm_terms.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/element_range.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {

std::vector<GradientNormTerm> GradientNormTermsFor(std::span<const ChunkRefs> chunks,
                                                   std::span<const pb::TieGroup> ties) {
  absl::flat_hash_set<std::string> later_members;
  for (const pb::TieGroup& tie : ties) {
    for (int i = 1; i < tie.parameters_size(); ++i) later_members.insert(tie.parameters(i));
  }
  std::vector<GradientNormTerm> terms;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const StageModel& model = *chunks[c].model;
    const ParameterStore& parameters = *chunks[c].parameters;
    int index = 0;
    for (int l = 0; l < model.num_layers(); ++l) {
      const int count = static_cast<int>(parameters.values_of(l).size());
      for (int p = 0; p < count; ++p, ++index) {
        if (later_members.contains(parameters.names()[index])) continue;
        terms.push_back({.slot = {.chunk = static_cast<int>(c), .index = index},
                         .layer = model.global_index(l),
                         .parameter = p});
      }
    }
  }
  return terms;
}

absl::Status AddGradientSquareSums(std::span<const GradientNormTerm> terms,
                                   std::span<const ChunkRefs> chunks, Device& device,
                                   pb::StepReport& report, int replica, int replicas) {
  std::vector<Tensor> grads;
  std::vector<const GradientNormTerm*> counted;
  grads.reserve(terms.size());
  for (const GradientNormTerm& term : terms) {
    const Tensor& grad = chunks[term.slot.chunk].parameters->grads()[term.slot.index];
    if (replicas == 1) {
      grads.push_back(grad);
    } else {
      const ElementRange part = ShardRange(grad.num_elements(), replicas, replica);
      if (part.empty()) continue;
      ASSIGN_OR_RETURN(grads.emplace_back(), ElementView(grad, part));
    }
    counted.push_back(&term);
  }
  if (grads.empty()) return absl::OkStatus();
  const std::string what = absl::StrCat("the squares of this stage's ", terms.size(),
                                        " gradients for training.clip_grad_norm");
  absl::StatusOr<Tensor> sums = Tensor::Empty(device, Shape{static_cast<int64_t>(grads.size())},
                                              DType::kF64, MemoryKind::kWorkspace);
  if (!sums.ok()) return WithContext(sums.status(), absl::StrCat("allocating the sums of ", what));
  RETURN_IF_ERROR(
      WithContext(device.ops().tensor.SumSquares(grads, *sums), absl::StrCat("summing ", what)));
  std::vector<double> host(grads.size());
  RETURN_IF_ERROR(WithContext(
      device.CopyToHost(*sums, host.data(), static_cast<int64_t>(host.size() * sizeof(double))),
      absl::StrCat("reading the sums of ", what)));
  for (size_t i = 0; i < counted.size(); ++i) {
    pb::GradSquareSum& out = *report.add_grad_square_sums();
    out.set_layer(counted[i]->layer);
    out.set_parameter(counted[i]->parameter);
    out.set_sum(host[i]);
  }
  return absl::OkStatus();
}

double GlobalGradientNorm(std::span<const pb::StepReport> reports, bool sharded) {
  std::vector<std::tuple<int, int, int, double>> terms;  // layer, parameter, replica, sum
  for (const pb::StepReport& report : reports) {
    if (!sharded && report.replica() != 0) continue;
    for (const pb::GradSquareSum& term : report.grad_square_sums()) {
      terms.emplace_back(term.layer(), term.parameter(), report.replica(), term.sum());
    }
  }
  std::sort(terms.begin(), terms.end());
  double sum = 0;
  for (const auto& term : terms) sum += std::get<3>(term);
  return std::sqrt(sum);
}

absl::Status ScaleGradients(std::span<const ChunkRefs> chunks, Device& device, float scale) {
  for (const ChunkRefs& chunk : chunks) {
    for (Tensor& grad : chunk.parameters->mutable_grads()) {
      RETURN_IF_ERROR(device.ops().tensor.Scale(scale, grad));
    }
  }
  return absl::OkStatus();
}

}  // namespace gpipe
