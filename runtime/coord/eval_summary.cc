#include "runtime/coord/eval_summary.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpipe {

absl::Status EvalSummary::Add(const std::vector<pb::StepReport>& reports) {
  // One last stage per data-parallel replica, each with the sums of its share of the batch.
  bool any = false;
  for (const pb::StepReport& report : reports) {
    if (!report.has_eval_samples()) continue;
    any = true;
    loss_sum_ += report.eval_loss_sum();
    samples_ += report.eval_samples();
    if (report.has_correct()) {
      classification_ = true;
      correct_ += report.correct();
      predictions_ += report.eval_predictions();
    }
  }
  if (!any) {
    return absl::InternalError("no stage reported evaluation sums for an evaluation batch");
  }
  return absl::OkStatus();
}

double EvalSummary::accuracy() const {
  if (!classification_ || predictions_ == 0) return -1.0;
  return static_cast<double>(correct_) / static_cast<double>(predictions_);
}

double EvalSummary::bits_per_byte() const { return bits_per_byte_ ? loss() / std::log(2.0) : -1.0; }

std::string EvalSummary::FormatLine() const {
  std::string line = absl::StrFormat("eval after step %d | loss %.4f", after_step_, loss());
  if (bits_per_byte() >= 0) absl::StrAppendFormat(&line, " | %.3f bits/byte", bits_per_byte());
  if (accuracy() >= 0) absl::StrAppendFormat(&line, " | acc %.2f%%", 100.0 * accuracy());
  absl::StrAppendFormat(&line, " | %d samples | %.0f ms", samples_, elapsed_ms_);
  return line;
}

Json EvalSummary::ToMetricsRecord() const {
  Json json = {{"eval", true}, {"step", after_step_}, {"loss", loss()}};
  if (accuracy() >= 0) json["accuracy"] = accuracy();
  if (bits_per_byte() >= 0) json["bits_per_byte"] = bits_per_byte();
  json["samples"] = samples_;
  json["eval_ms"] = elapsed_ms_;
  return json;
}

}  // namespace gpipe
