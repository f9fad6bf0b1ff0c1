// Next-token windows over a sequence of tokens, shared by the language-model sources (data.text:
// the bytes of files; data.tokens: a file of token ids). With T = seq_len, the first
// floor((1 - eval_fraction) * total) tokens are the training split and the rest the held-out
// split. Training sample i starts at token i (every offset: train_len - T samples); held-out
// sample j starts at train_len + j * T (non-overlapping: floor((eval_len - 1) / T) samples). A
// sample's input is tokens [s, s + T), its target tokens [s + 1, s + T + 1).
#ifndef GPIPE_RUNTIME_DATA_TOKEN_WINDOWS_H_
#define GPIPE_RUNTIME_DATA_TOKEN_WINDOWS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/data/dataset.h"

namespace gpipe {

// How a source names itself and its tokens in messages.
struct TokenSourceNames {
  const char* field;        // "data.text"
  const char* ids;          // what the ids are: "the bytes"
  const char* unit;         // one token: "byte"
  const char* class_value;  // what one output score stands for: "byte value"
  const char* more;         // "bytes of text": "give at least N <more>"
  const char* more_eval;    // "text": "give more <more_eval>"
  const char* whole;        // "text": "hold out the end of the <whole>"
};

// eval_fraction must be in [0, 1) (INVALID_ARGUMENT), and above 0 for kEval
// (FAILED_PRECONDITION: there is no held-out split).
absl::Status CheckEvalFraction(const TokenSourceNames& names, double eval_fraction,
                               DataSplit split);

// The model must take int64 [seq_len] ids and its loss int64 [seq_len] class ids.
// INVALID_ARGUMENT naming the source otherwise.
absl::Status CheckTokenWindowRequirements(const TokenSourceNames& names,
                                          const DataRequirements& requirements);

// One split's windows: sample i starts at token offset + i * stride.
struct TokenWindows {
  int64_t offset = 0;
  int64_t stride = 1;
  int64_t size = 0;
  int64_t split_length = 0;  // tokens in the split
};

// The windows of `split` over `total` tokens. INVALID_ARGUMENT naming the source when the split
// holds no window (with the fewest tokens that would give the training split one).
absl::StatusOr<TokenWindows> SplitTokenWindows(const TokenSourceNames& names, int64_t total,
                                               int64_t seq_len, double eval_fraction,
                                               DataSplit split);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DATA_TOKEN_WINDOWS_H_
