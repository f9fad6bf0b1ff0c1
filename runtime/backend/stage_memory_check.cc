#include "runtime/backend/stage_memory_check.h"

#include <unistd.h>

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpipe {
namespace {

std::string Gib(double bytes) { return absl::StrFormat("%.3g GiB", bytes / (1 << 30)); }

}  // namespace

absl::Status CheckStageMemory(const pb::Setup& setup, int64_t capacity_bytes,
                              absl::string_view device) {
  if (!setup.has_predicted_memory() || capacity_bytes <= 0) return absl::OkStatus();
  const pb::StageMemory& memory = setup.predicted_memory();
  // In double: the parts may each be near 2^63.
  const double needed = static_cast<double>(memory.parameter_bytes()) +
                        static_cast<double>(memory.activation_bytes());
  if (needed <= static_cast<double>(capacity_bytes)) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("rank ", setup.rank(), " (stage ", setup.stage(), "): the stage needs about ",
                   Gib(needed), " (parameters, gradients and optimizer state ",
                   Gib(memory.parameter_bytes()), ", activations at the schedule's peak ",
                   Gib(memory.activation_bytes()), ") but ", device, " is ", Gib(capacity_bytes),
                   "; use more stages, more micro-batches, re-materialization or smaller layers "
                   "(gpipe-plan show prints the prediction per stage)"));
}

int64_t HostMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  if (pages > std::numeric_limits<int64_t>::max() / page)
    return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(pages) * page;
}

}  // namespace gpipe
