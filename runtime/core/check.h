// GPIPE_CHECK(cond) << "context": aborts the process with file:line and the message when an
// internal invariant is broken. For invariants only; errors a user can cause return a Status.
#ifndef GPIPE_RUNTIME_CORE_CHECK_H_
#define GPIPE_RUNTIME_CORE_CHECK_H_

#include <sstream>

namespace gpipe::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Lets `cond ? (void)0 : Voidify() & CheckFailure(...).stream() << ...` type-check.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace gpipe::internal

#define GPIPE_CHECK(cond)                 \
  (cond) ? (void)0                        \
         : ::gpipe::internal::Voidify() & \
               ::gpipe::internal::CheckFailure(__FILE__, __LINE__, #cond).stream()

#endif  // GPIPE_RUNTIME_CORE_CHECK_H_
