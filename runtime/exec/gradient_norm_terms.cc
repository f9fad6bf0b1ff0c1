#include "runtime/exec/gradient_norm_terms.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
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
                                   pb::StepReport& report) {
  if (terms.empty()) return absl::OkStatus();
  std::vector<Tensor> grads;
  grads.reserve(terms.size());
  for (const GradientNormTerm& term : terms) {
    grads.push_back(chunks[term.slot.chunk].parameters->grads()[term.slot.index]);
  }
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
  for (size_t i = 0; i < terms.size(); ++i) {
    pb::GradSquareSum& out = *report.add_grad_square_sums();
    out.set_layer(terms[i].layer);
    out.set_parameter(terms[i].parameter);
    out.set_sum(host[i]);
  }
  return absl::OkStatus();
}

double GlobalGradientNorm(std::span<const pb::StepReport> reports) {
  std::vector<const pb::GradSquareSum*> terms;
  for (const pb::StepReport& report : reports) {
    if (report.replica() != 0) continue;
    for (const pb::GradSquareSum& term : report.grad_square_sums()) terms.push_back(&term);
  }
  std::sort(terms.begin(), terms.end(), [](const pb::GradSquareSum* a, const pb::GradSquareSum* b) {
    return std::make_pair(a->layer(), a->parameter()) < std::make_pair(b->layer(), b->parameter());
  });
  double sum = 0;
  for (const pb::GradSquareSum* term : terms) sum += term->sum();
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
