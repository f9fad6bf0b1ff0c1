#include "tests/support/process_tree.h"

#include <dirent.h>

#include <algorithm>
#include <cstdint>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace gpipe::testing {
namespace {

// /proc/<pid>/stat: "pid (comm) state ppid ...".
struct ProcInfo {
  pid_t ppid = 0;
  char state = '?';
  std::string comm;
};

bool ReadProc(pid_t pid, ProcInfo& info) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text;
  if (!std::getline(in, text)) return false;
  const size_t open = text.find('('), close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 4 > text.size()) {
    return false;
  }
  info.comm = text.substr(open + 1, close - open - 1);
  info.state = text[close + 2];
  int ppid = 0;
  if (!absl::SimpleAtoi(text.substr(close + 4, text.find(' ', close + 4) - close - 4), &ppid)) {
    return false;
  }
  info.ppid = ppid;
  return true;
}

}  // namespace

std::vector<pid_t> ChildrenOf(pid_t parent, const std::string& comm) {
  std::vector<pid_t> children;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return children;
  while (const dirent* entry = ::readdir(dir)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid)) continue;
    ProcInfo info;
    if (ReadProc(pid, info) && info.ppid == parent && (comm.empty() || info.comm == comm)) {
      children.push_back(pid);
    }
  }
  ::closedir(dir);
  return children;
}

std::vector<pid_t> WorkersOf(pid_t run) {
  std::vector<pid_t> workers;
  for (pid_t launcher : ChildrenOf(run)) {
    for (pid_t worker : ChildrenOf(launcher, "gpipe-worker")) workers.push_back(worker);
  }
  std::sort(workers.begin(), workers.end());
  return workers;
}

bool CatchesSignal(pid_t pid, int signo) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "SigCgt:")) continue;
    uint64_t mask = 0;
    if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(rest), &mask)) return false;
    return (mask >> (signo - 1)) & 1;
  }
  return false;
}

bool Alive(pid_t pid) {
  ProcInfo info;
  return ReadProc(pid, info) && info.state != 'Z' && info.state != 'X';
}

}  // namespace gpipe::testing
