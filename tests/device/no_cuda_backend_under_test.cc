// The conformance suite's optional backends in a build without the CUDA backend: none.
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {

void AppendOptionalBackendsUnderTest(std::vector<BackendUnderTest>&) {}

}  // namespace gpipe::testing
