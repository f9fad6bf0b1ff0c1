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
  std::vector<float> host;
  for (const GradientNormTerm& term : terms) {
    const Tensor& grad = chunks[term.slot.chunk].parameters->grads()[term.slot.index];
    host.resize(grad.num_elements());
    RETURN_IF_ERROR(WithContext(
        device.CopyToHost(grad, host.data(), static_cast<int64_t>(host.size() * sizeof(float))),
        absl::StrCat("reading the gradient of '",
                     chunks[term.slot.chunk].parameters->names()[term.slot.index],
                     "' for training.clip_grad_norm")));
    double sum = 0;
    for (float g : host) sum += static_cast<double>(g) * static_cast<double>(g);
    pb::GradSquareSum& out = *report.add_grad_square_sums();
    out.set_layer(term.layer);
    out.set_parameter(term.parameter);
    out.set_sum(sum);
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
