#include "runtime/schedule/instruction.h"

#include <type_traits>

#include "absl/strings/str_cat.h"

namespace gpipe::schedule {
namespace {

// Instructions that carry a micro-batch and a chunk (everything except the step-level ones).
template <typename T>
constexpr bool kIsMicroBatchInstruction =
    !std::is_same_v<T, AllReduceGrads> && !std::is_same_v<T, OptimizerStep> &&
    !std::is_same_v<T, ReportEval>;

template <typename T>
const char* NameOf() {
  if constexpr (std::is_same_v<T, LoadMicroBatch>) return "LoadMicroBatch";
  if constexpr (std::is_same_v<T, RecvActivation>) return "RecvActivation";
  if constexpr (std::is_same_v<T, Forward>) return "Forward";
  if constexpr (std::is_same_v<T, SendActivation>) return "SendActivation";
  if constexpr (std::is_same_v<T, RecvGrad>) return "RecvGrad";
  if constexpr (std::is_same_v<T, Backward>) return "Backward";
  if constexpr (std::is_same_v<T, BackwardInput>) return "BackwardInput";
  if constexpr (std::is_same_v<T, BackwardWeight>) return "BackwardWeight";
  if constexpr (std::is_same_v<T, SendGrad>) return "SendGrad";
  if constexpr (std::is_same_v<T, SendSkip>) return "SendSkip";
  if constexpr (std::is_same_v<T, RecvSkip>) return "RecvSkip";
  if constexpr (std::is_same_v<T, SendSkipGrad>) return "SendSkipGrad";
  if constexpr (std::is_same_v<T, RecvSkipGrad>) return "RecvSkipGrad";
  if constexpr (std::is_same_v<T, AllReduceGrads>) return "AllReduceGrads";
  if constexpr (std::is_same_v<T, OptimizerStep>) return "OptimizerStep";
  if constexpr (std::is_same_v<T, ReportEval>) return "ReportEval";
}

template <typename T>
constexpr bool kIsSkipInstruction =
    std::is_same_v<T, SendSkip> || std::is_same_v<T, RecvSkip> || std::is_same_v<T, SendSkipGrad> ||
    std::is_same_v<T, RecvSkipGrad>;

}  // namespace

std::string ToString(const Instruction& instruction) {
  return std::visit(
      [](const auto& op) -> std::string {
        using T = std::decay_t<decltype(op)>;
        if constexpr (kIsSkipInstruction<T>) {
          return absl::StrCat(NameOf<T>(), "(mb=", op.micro_batch,
                              op.chunk != 0 ? absl::StrCat(", chunk=", op.chunk) : "",
                              ", layer=", op.skip_layer, ")");
        } else if constexpr (kIsMicroBatchInstruction<T>) {
          if (op.chunk != 0) {
            return absl::StrCat(NameOf<T>(), "(mb=", op.micro_batch, ", chunk=", op.chunk, ")");
          }
          return absl::StrCat(NameOf<T>(), "(mb=", op.micro_batch, ")");
        } else {
          return NameOf<T>();
        }
      },
      instruction);
}

std::optional<int> MicroBatchOf(const Instruction& instruction) {
  return std::visit(
      [](const auto& op) -> std::optional<int> {
        using T = std::decay_t<decltype(op)>;
        if constexpr (kIsMicroBatchInstruction<T>) {
          return op.micro_batch;
        } else {
          return std::nullopt;
        }
      },
      instruction);
}

int ChunkOf(const Instruction& instruction) {
  return std::visit(
      [](const auto& op) -> int {
        using T = std::decay_t<decltype(op)>;
        if constexpr (kIsMicroBatchInstruction<T>) {
          return op.chunk;
        } else {
          return 0;
        }
      },
      instruction);
}

std::optional<int> SkipLayerOf(const Instruction& instruction) {
  return std::visit(
      [](const auto& op) -> std::optional<int> {
        using T = std::decay_t<decltype(op)>;
        if constexpr (kIsSkipInstruction<T>) {
          return op.skip_layer;
        } else {
          return std::nullopt;
        }
      },
      instruction);
}

}  // namespace gpipe::schedule
