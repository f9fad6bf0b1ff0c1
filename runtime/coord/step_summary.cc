#include "runtime/coord/step_summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/byte_format.h"

namespace gpipe {
namespace {

// A rate in three significant digits with an SI prefix: {"85.1", "k"}, {"1.61", "T"}.
struct ScaledRate {
  std::string digits;
  const char* prefix;
};

ScaledRate Scale(double rate) {
  static constexpr std::pair<double, const char*> kPrefixes[] = {
      {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  double value = rate;
  const char* prefix = "";
  for (const auto& [factor, name] : kPrefixes) {
    if (std::abs(rate) >= factor) {
      value = rate / factor;
      prefix = name;
      break;
    }
  }
  if (value >= 99.95) return {absl::StrFormat("%.0f", value), prefix};
  if (value >= 9.995) return {absl::StrFormat("%.1f", value), prefix};
  return {absl::StrFormat("%.2f", value), prefix};
}

// "1.23 TFLOP/s" from TFLOP/s.
std::string FormatFlopRate(double tflops) {
  const ScaledRate scaled = Scale(tflops * 1e12);
  return absl::StrCat(scaled.digits, " ", scaled.prefix, "FLOP/s");
}

}  // namespace

absl::StatusOr<StepSummary> Summarize(int64_t step, const std::vector<pb::StepReport>& reports,
                                      int64_t global_batch, double step_ms, bool applied,
                                      int64_t predictions_per_sample) {
  StepSummary s;
  s.step = step;
  s.applied = applied;
  s.step_ms = step_ms;
  s.samples_per_s = step_ms > 0 ? global_batch / (step_ms / 1000.0) : 0.0;
  double bubble_sum = 0.0;
  int64_t correct = 0;
  bool counts_correct = false;
  bool has_loss = false;
  for (const pb::StepReport& report : reports) {
    if (report.replica() < 0 || report.replica() >= static_cast<int>(reports.size())) {
      return absl::InternalError(absl::StrCat("report from rank ", report.rank(), " names replica ",
                                              report.replica(), " of a job of ", reports.size(),
                                              " ranks"));
    }
    s.replicas = std::max(s.replicas, report.replica() + 1);
  }
  s.replica_loss.assign(s.replicas, 0.0);
  for (size_t r = 0; r < reports.size(); ++r) {
    const pb::StepReport& report = reports[r];
    if (report.step() != step || report.rank() != static_cast<int>(r)) {
      return absl::InternalError(absl::StrCat("report from rank ", report.rank(), " for step ",
                                              report.step(), " arrived at slot ", r, " of step ",
                                              step));
    }
    if (report.has_loss()) {
      has_loss = true;
      s.replica_loss[report.replica()] += report.loss();
    }
    if (report.has_correct()) {
      counts_correct = true;
      correct += report.correct();
    }
    s.stage.push_back(report.stage());
    s.replica.push_back(report.replica());
    s.all_reduce_ms.push_back(report.all_reduce_ms());
    s.all_reduce_exposed_ms.push_back(report.all_reduce_exposed_ms());
    s.peak_bytes.push_back(report.peak_bytes());
    s.bytes_sent.push_back(report.bytes_sent());
    s.bytes_received.push_back(report.bytes_received());
    auto kind = [&report](const char* name) -> int64_t {
      const auto it = report.peak_bytes_by_kind().find(name);
      return it == report.peak_bytes_by_kind().end() ? 0 : it->second;
    };
    s.peak_boundary_bytes.push_back(kind("boundary"));
    s.peak_activation_bytes.push_back(kind("activation"));
    s.peak_boundary_grad_bytes.push_back(kind("boundary_grad"));
    s.peak_optimizer_state_bytes.push_back(kind("optimizer_state"));
    if (report.has_all_gather_ms()) {
      s.all_gather_ms.resize(r, 0.0);
      s.all_gather_ms.push_back(report.all_gather_ms());
    }
    if (report.has_peak_offload_bytes()) {
      s.peak_offload_bytes.resize(r, 0);
      s.offloaded_bytes.resize(r, 0);
      s.offload_wait_ms.resize(r, 0.0);
      s.peak_offload_bytes.push_back(report.peak_offload_bytes());
      s.offloaded_bytes.push_back(report.offloaded_bytes());
      s.offload_wait_ms.push_back(report.offload_wait_ms());
    }
    if (report.has_graph_launches()) {
      s.graph_launches.resize(r, 0);
      s.graphs_captured.resize(r, 0);
      s.graph_launches.push_back(report.graph_launches());
      s.graphs_captured.push_back(report.graphs_captured());
    }
    s.busy_ms.push_back(report.busy_ms());
    const double stage_ms = std::max(report.step_ms(), 1e-9);
    bubble_sum += std::clamp(1.0 - report.busy_ms() / stage_ms, 0.0, 1.0);
  }
  if (!s.all_gather_ms.empty()) s.all_gather_ms.resize(reports.size(), 0.0);
  if (!s.peak_offload_bytes.empty()) {
    s.peak_offload_bytes.resize(reports.size(), 0);
    s.offloaded_bytes.resize(reports.size(), 0);
    s.offload_wait_ms.resize(reports.size(), 0.0);
  }
  if (!s.graph_launches.empty()) {
    s.graph_launches.resize(reports.size(), 0);
    s.graphs_captured.resize(reports.size(), 0);
  }
  s.bubble = reports.empty() ? 0.0 : bubble_sum / reports.size();
  // Each replica's part is its samples' losses over the whole global batch: they add up.
  if (has_loss) {
    for (double part : s.replica_loss) s.loss += part;
  }
  if (counts_correct && global_batch > 0 && predictions_per_sample > 0) {
    s.accuracy =
        static_cast<double>(correct) / (static_cast<double>(global_batch) * predictions_per_sample);
  }
  return s;
}

Json ToMetricsRecord(const StepSummary& s) {
  Json json = {{"step", s.step}, {"loss", s.loss}};
  if (s.accuracy >= 0) json["accuracy"] = s.accuracy;
  json["applied"] = s.applied;
  json["lr"] = s.lr;
  if (s.grad_norm >= 0) json["grad_norm"] = s.grad_norm;
  json["samples_per_s"] = s.samples_per_s;
  if (s.tokens_per_s >= 0) json["tokens_per_s"] = s.tokens_per_s;
  json["step_ms"] = s.step_ms;
  json["bubble"] = s.bubble;
  if (s.mfu >= 0) json["mfu"] = s.mfu;
  json["peak_bytes"] = s.peak_bytes;
  json["peak_boundary_bytes"] = s.peak_boundary_bytes;
  json["peak_activation_bytes"] = s.peak_activation_bytes;
  json["peak_boundary_grad_bytes"] = s.peak_boundary_grad_bytes;
  json["peak_optimizer_state_bytes"] = s.peak_optimizer_state_bytes;
  json["busy_ms"] = s.busy_ms;
  json["bytes_sent"] = s.bytes_sent;
  json["bytes_received"] = s.bytes_received;
  if (!s.tflops_per_rank.empty()) json["tflops_per_rank"] = s.tflops_per_rank;
  if (!s.peak_offload_bytes.empty()) {
    json["peak_offload_bytes"] = s.peak_offload_bytes;
    json["offloaded_bytes"] = s.offloaded_bytes;
    json["offload_wait_ms"] = s.offload_wait_ms;
  }
  if (!s.graph_launches.empty()) {
    json["graph_launches"] = s.graph_launches;
    json["graphs_captured"] = s.graphs_captured;
  }
  if (s.replicas > 1) {
    json["replicas"] = s.replicas;
    json["replica_loss"] = s.replica_loss;
    json["stage"] = s.stage;
    json["replica"] = s.replica;
    json["all_reduce_ms"] = s.all_reduce_ms;
    json["all_reduce_exposed_ms"] = s.all_reduce_exposed_ms;
    if (!s.all_gather_ms.empty()) json["all_gather_ms"] = s.all_gather_ms;
  }
  return json;
}

std::string FormatProgressLine(const StepSummary& s, int64_t total_steps) {
  std::string line = absl::StrFormat("step %d/%d | loss %.4f", s.step + 1, total_steps, s.loss);
  if (s.accuracy >= 0) absl::StrAppendFormat(&line, " | acc %.1f%%", 100.0 * s.accuracy);
  absl::StrAppendFormat(&line, " | lr %.2e", s.lr);
  if (s.grad_norm >= 0) absl::StrAppendFormat(&line, " | grad norm %.4g", s.grad_norm);
  absl::StrAppendFormat(&line, " | %.0f samples/s", s.samples_per_s);
  if (s.tokens_per_s >= 0) {
    const ScaledRate tokens = Scale(s.tokens_per_s);
    absl::StrAppend(&line, " | ", tokens.digits, tokens.prefix, " tok/s");
  }
  absl::StrAppendFormat(&line, " | step %.2f ms | bubble %.1f%%", s.step_ms, 100.0 * s.bubble);
  if (!s.tflops_per_rank.empty()) {
    const double mean = std::accumulate(s.tflops_per_rank.begin(), s.tflops_per_rank.end(), 0.0) /
                        s.tflops_per_rank.size();
    absl::StrAppend(&line, " | ", FormatFlopRate(mean), "/rank");
    const auto fastest = std::max_element(s.tflops_per_rank.begin(), s.tflops_per_rank.end());
    // Uneven stages: the busiest one bounds the pipeline, so name it.
    if (*fastest > mean * (1 + 1e-9)) {
      const size_t rank = fastest - s.tflops_per_rank.begin();
      absl::StrAppend(&line, " (max ", FormatFlopRate(*fastest), " on stage ",
                      rank < s.stage.size() ? s.stage[rank] : static_cast<int>(rank), ")");
    }
  }
  if (s.mfu >= 0) absl::StrAppendFormat(&line, " | MFU %.1f%%", 100.0 * s.mfu);
  if (!s.peak_bytes.empty()) {
    const auto fullest = std::max_element(s.peak_bytes.begin(), s.peak_bytes.end());
    const size_t rank = fullest - s.peak_bytes.begin();
    absl::StrAppend(&line, " | peak mem ", FormatBytes(*fullest), " (stage ",
                    rank < s.stage.size() ? s.stage[rank] : static_cast<int>(rank),
                    s.replicas > 1 && rank < s.replica.size()
                        ? absl::StrCat(", replica ", s.replica[rank])
                        : std::string(),
                    ")");
  }
  if (!s.peak_offload_bytes.empty()) {
    absl::StrAppendFormat(
        &line, " | offload %s host (%.2f ms waited)",
        FormatBytes(*std::max_element(s.peak_offload_bytes.begin(), s.peak_offload_bytes.end())),
        *std::max_element(s.offload_wait_ms.begin(), s.offload_wait_ms.end()));
  }
  if (s.replicas > 1 && !s.all_reduce_ms.empty()) {
    absl::StrAppendFormat(
        &line, " | %d replicas, %s %.2f ms (%.2f ms exposed)", s.replicas,
        s.all_gather_ms.empty() ? "all-reduce" : "reduce-scatter",
        *std::max_element(s.all_reduce_ms.begin(), s.all_reduce_ms.end()),
        *std::max_element(s.all_reduce_exposed_ms.begin(), s.all_reduce_exposed_ms.end()));
    if (!s.all_gather_ms.empty()) {
      absl::StrAppendFormat(&line, ", all-gather %.2f ms",
                            *std::max_element(s.all_gather_ms.begin(), s.all_gather_ms.end()));
    }
  }
  if (!s.applied) absl::StrAppend(&line, " | SKIPPED (non-finite loss or gradients)");
  return line;
}

}  // namespace gpipe
