// libFuzzer target: a plan's text through the loader and the whole analysis (parse, overrides'
// merge rules, shape inference, partitioning, every semantic check). Any input must end in a
// plan or an error, never a crash, a hang or a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>

#include "layers/registry.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gpipe::LayerRegistry* registry =
      new gpipe::LayerRegistry(gpipe::LayerRegistry::WithBuiltins());
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto loaded = gpipe::ParsePlanText(text, "fuzz.pbtxt", "/nonexistent", {});
  if (loaded.ok()) (void)gpipe::AnalyzePlan(*loaded, *registry);
  return 0;
}
