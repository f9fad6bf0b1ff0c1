// PlanErrors: collects every semantic error found in a plan, each as
// "<file:line:col>: <field path>: <what is wrong and what to do>", so a user sees them all at
// once. Internal to the plan module.
#ifndef GPIPE_RUNTIME_PLAN_PLAN_ERRORS_H_
#define GPIPE_RUNTIME_PLAN_PLAN_ERRORS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/plan/plan_loader.h"

namespace gpipe {

class PlanErrors {
 public:
  explicit PlanErrors(const LoadedPlan& loaded) : loaded_(loaded) {}

  // Reports `message` about `field_path`, located where that field (or its nearest written
  // ancestor) was written.
  void Add(const std::string& field_path, const std::string& message);
  // "file:line:col" of a field, for messages that point at a second place.
  std::string LocationOf(const std::string& field_path) const {
    return loaded_.LocationOf(field_path);
  }
  bool empty() const { return errors_.empty(); }
  // OK when nothing was reported; otherwise INVALID_ARGUMENT with one error per line, in the
  // order they were reported.
  absl::Status ToStatus() const;

 private:
  const LoadedPlan& loaded_;
  std::vector<std::string> errors_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_PLAN_ERRORS_H_
