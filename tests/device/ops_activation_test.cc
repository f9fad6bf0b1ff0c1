// Conformance of the activation ops family on every backend (see backends_under_test.h).
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {
namespace {}  // namespace
}  // namespace gpipe::testing
