#include "launcher/executable_lookup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gpipe {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

absl::StatusOr<std::string> FindExecutable(const std::string& name,
                                           const std::string& path_variable) {
  if (name.empty()) return absl::InvalidArgumentError("no program name");
  if (name.find('/') != std::string::npos) {
    if (IsExecutableFile(name)) return name;
    return absl::NotFoundError(absl::StrCat(name, ": no such executable file"));
  }
  for (absl::string_view directory : absl::StrSplit(path_variable, ':')) {
    const std::string candidate =
        directory.empty() ? name
                          : absl::StrCat(directory, directory.back() == '/' ? "" : "/", name);
    if (IsExecutableFile(candidate)) return candidate;
  }
  return absl::NotFoundError(absl::StrCat(name, ": not found on PATH (",
                                          path_variable.empty() ? "empty" : path_variable, ")"));
}

}  // namespace gpipe
