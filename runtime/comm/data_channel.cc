#include "runtime/comm/data_channel.h"

#include "absl/strings/str_cat.h"

namespace gpipe {

std::string ToString(const TransferKey& key) {
  std::string kind;
  switch (key.kind) {
    case TransferKind::kActivation:
      kind = "activation";
      break;
    case TransferKind::kGradient:
      kind = "gradient";
      break;
    default:
      kind = absl::StrCat("kind(", static_cast<int32_t>(key.kind), ")");
  }
  std::string text = absl::StrCat(kind, " step=", key.step, " mb=", key.micro_batch);
  if (key.chunk != 0) absl::StrAppend(&text, " chunk=", key.chunk);
  if (key.skip_layer >= 0) absl::StrAppend(&text, " skip layer=", key.skip_layer);
  return text;
}

const char* CollectiveName(Collective collective) {
  switch (collective) {
    case Collective::kAllReduce:
      return "all-reduce";
    case Collective::kReduceScatter:
      return "reduce-scatter";
    case Collective::kAllGather:
      return "all-gather";
  }
  return "collective";
}

}  // namespace gpipe
