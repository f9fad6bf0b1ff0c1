// The processes of a job under test, read from /proc: gpipe-run -> launcher -> gpipe-worker.
#ifndef GPIPE_TESTS_SUPPORT_PROCESS_TREE_H_
#define GPIPE_TESTS_SUPPORT_PROCESS_TREE_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace gpipe::testing {

// The children of `parent` (named `comm`, when given).
std::vector<pid_t> ChildrenOf(pid_t parent, const std::string& comm = "");
// The job's gpipe-worker processes under gpipe-run `run`, by pid.
std::vector<pid_t> WorkersOf(pid_t run);
// Neither gone nor a zombie.
bool Alive(pid_t pid);
// Whether `pid` has a handler installed for `signo` (/proc/PID/status SigCgt); false when that
// cannot be read.
bool CatchesSignal(pid_t pid, int signo);

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_SUPPORT_PROCESS_TREE_H_
