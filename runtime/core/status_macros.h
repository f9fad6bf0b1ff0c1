// Status helpers used at every module boundary.
//
//   RETURN_IF_ERROR(expr);              // returns expr's status when it is not OK
//   ASSIGN_OR_RETURN(auto x, expr);     // x = *expr, or returns expr's status
//   WithContext(status, "stage 2")      // "stage 2: <message>", same code
#ifndef GPIPE_RUNTIME_CORE_STATUS_MACROS_H_
#define GPIPE_RUNTIME_CORE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gpipe {

// Prefixes `context` to a non-OK status's message, keeping its code. OK stays OK.
inline absl::Status WithContext(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

}  // namespace gpipe

#define GPIPE_STATUS_CONCAT_INNER_(a, b) a##b
#define GPIPE_STATUS_CONCAT_(a, b) GPIPE_STATUS_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    const ::absl::Status gpipe_status_ = (expr);   \
    if (!gpipe_status_.ok()) return gpipe_status_; \
  } while (false)

#define ASSIGN_OR_RETURN(lhs, expr) \
  GPIPE_ASSIGN_OR_RETURN_IMPL_(GPIPE_STATUS_CONCAT_(gpipe_statusor_, __LINE__), lhs, expr)

#define GPIPE_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)  \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // GPIPE_RUNTIME_CORE_STATUS_MACROS_H_
