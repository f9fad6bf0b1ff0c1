// FormatStageTable (declared in plan_analysis.h): the text `gpipe-plan check` prints.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "runtime/plan/plan_analysis.h"

namespace gpipe {
namespace {

// 1234567 -> "1,234,567".
std::string WithSeparators(int64_t value) {
  std::string digits = absl::StrCat(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

// 903168 -> "903.2K"; below 1000 printed whole.
std::string Human(double value) {
  static constexpr const char* kUnits[] = {"", "K", "M", "G", "T", "P", "E"};
  int unit = 0;
  while (value >= 1000 && unit < 6) {
    value /= 1000;
    ++unit;
  }
  return unit == 0 ? absl::StrFormat("%.0f", value)
                   : absl::StrFormat("%.1f%s", value, kUnits[unit]);
}

std::string Percent(double part, double whole) {
  return whole > 0 ? absl::StrFormat("%.1f%%", 100.0 * part / whole) : "-";
}

// Columns padded to their widest cell; `right[c]` right-aligns column c (numbers).
class TextTable {
 public:
  TextTable(std::vector<std::string> header, std::vector<bool> right) : right_(std::move(right)) {
    rows_.push_back(std::move(header));
  }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  std::string Render() const {
    std::vector<size_t> width(right_.size(), 0);
    for (const auto& row : rows_) {
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    std::string out;
    for (const auto& row : rows_) {
      std::string line;
      for (size_t c = 0; c < row.size(); ++c) {
        const std::string pad(width[c] - row[c].size(), ' ');
        if (c > 0) line += "  ";
        line += right_[c] ? pad + row[c] : row[c] + pad;
      }
      line.erase(line.find_last_not_of(' ') + 1);
      absl::StrAppend(&out, line, "\n");
    }
    return out;
  }

 private:
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

std::string StageLayerNames(const AnalyzedPlan& plan, const StageInfo& stage) {
  const int count = stage.end_layer - stage.first_layer;
  if (count > 4) {
    return absl::StrCat(plan.layers[stage.first_layer].name, " .. ",
                        plan.layers[stage.end_layer - 1].name, " (", count, " layers)");
  }
  std::vector<std::string> names;
  for (int l = stage.first_layer; l < stage.end_layer; ++l) names.push_back(plan.layers[l].name);
  return absl::StrJoin(names, ", ");
}

std::string EnumName(const google::protobuf::EnumDescriptor* descriptor, int value) {
  const auto* entry = descriptor->FindValueByNumber(value);
  return entry == nullptr ? absl::StrCat(value) : std::string(entry->name());
}

}  // namespace

std::string FormatStageTable(const AnalyzedPlan& plan) {
  int64_t parameters = 0;
  double flops = 0;
  for (const LayerInfo& layer : plan.layers) {
    parameters += layer.parameters;
    flops += layer.flops_per_sample;
  }
  const pb::Pipeline& pipeline = plan.plan.pipeline();
  std::string out;
  const std::string title =
      plan.plan.name().empty() ? "plan" : absl::StrCat("plan '", plan.plan.name(), "'");
  const bool interleaved = pipeline.virtual_stages() > 1;
  absl::StrAppend(
      &out, title, ": ", plan.layers.size(), " layers in ", pipeline.stages(), " stages",
      interleaved ? absl::StrCat(" x ", pipeline.virtual_stages(), " chunks") : std::string(), ", ",
      WithSeparators(parameters), " parameters, ", Human(flops),
      " FLOP/sample (forward+backward)\n");
  if (!plan.layers.empty()) {
    const pb::Loss& loss = plan.plan.model().loss();
    const auto* loss_oneof = pb::Loss::descriptor()->FindOneofByName("kind");
    const auto* loss_field = loss.GetReflection()->GetOneofFieldDescriptor(loss, loss_oneof);
    absl::StrAppend(&out, "input ", plan.layers.front().input_shape.ToString(), " -> output ",
                    plan.layers.back().output_shape.ToString(), "; loss ",
                    loss_field == nullptr ? "?" : std::string(loss_field->name()), ", target ",
                    plan.target_shape.ToString(), " ", DTypeName(plan.target_dtype));
    if (plan.num_classes > 0) absl::StrAppend(&out, ", ", plan.num_classes, " classes");
    absl::StrAppend(&out, "\n");
  }
  const int64_t micro_batch_size = MicroBatchSize(plan.plan);
  absl::StrAppend(
      &out, "pipeline: ",
      pipeline.data_parallel() > 1
          ? absl::StrCat(pipeline.data_parallel(), " data-parallel replicas, each ")
          : std::string(),
      pipeline.micro_batches(), " micro-batches of ", micro_batch_size, " samples, schedule ",
      EnumName(pb::Schedule_descriptor(), pipeline.schedule()), ", remat ",
      EnumName(pb::Remat_descriptor(), pipeline.remat()), ", partition ",
      // PROFILE's choice arrives as boundaries written by the balancer before the analysis.
      pipeline.balance() == pb::PROFILE
          ? std::string("balanced on PROFILE (the least predicted step time)")
      : pipeline.boundaries_size() > 0
          ? std::string("from pipeline.boundaries")
          : absl::StrCat("balanced on ", EnumName(pb::Balance_descriptor(), pipeline.balance())),
      "\n\n");

  // "stage" is the process; interleaved parts show as stage.chunk ("1.0", "1.1").
  auto label = [interleaved](const StageInfo& stage) {
    return interleaved ? absl::StrCat(stage.stage, ".", stage.chunk) : absl::StrCat(stage.stage);
  };
  TextTable stages({interleaved ? "stage.chunk" : "stage", "layers", "parameters", "share",
                    "FLOP/sample", "share", "input", "output"},
                   {true, false, true, true, true, true, false, false});
  for (const StageInfo& stage : plan.stages) {
    stages.Add({label(stage), StageLayerNames(plan, stage), WithSeparators(stage.parameters),
                Percent(stage.parameters, parameters), Human(stage.flops_per_sample),
                Percent(stage.flops_per_sample, flops), stage.input_shape.ToString(),
                stage.output_shape.ToString()});
  }
  absl::StrAppend(&out, stages.Render(), "\n");

  TextTable layers({"layer", "name", "kind", interleaved ? "stage.chunk" : "stage", "input",
                    "output", "parameters", "FLOP/sample"},
                   {true, false, false, true, false, false, true, true});
  for (const StageInfo& stage : plan.stages) {
    for (int l = stage.first_layer; l < stage.end_layer; ++l) {
      const LayerInfo& layer = plan.layers[l];
      layers.Add({absl::StrCat(l), layer.name, layer.kind, label(stage),
                  layer.input_shape.ToString(), layer.output_shape.ToString(),
                  WithSeparators(layer.parameters), Human(layer.flops_per_sample)});
    }
  }
  absl::StrAppend(&out, layers.Render());
  return out;
}

}  // namespace gpipe
