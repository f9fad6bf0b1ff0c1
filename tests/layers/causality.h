// The causality check every sequence layer's test shares: for a layer over per-sample [T, D],
// changing position s of one sample changes that sample's outputs at positions >= s and no
// others (nor any other sample's).
#ifndef GPIPE_TESTS_LAYERS_CAUSALITY_H_
#define GPIPE_TESTS_LAYERS_CAUSALITY_H_

#include "layers/layer.h"

namespace gpipe::testing {

// Runs `layer` (input_shape() [T, D]) in evaluation on two samples of uniform values, then once
// per position s with sample 1's row s changed by different amounts per feature (a common shift
// would vanish in a normalization), and records gtest failures where an output before s moved, an
// output at or after s did not, or sample 0 moved.
void ExpectCausal(const Layer& layer, uint64_t seed);

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_LAYERS_CAUSALITY_H_
