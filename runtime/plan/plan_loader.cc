#include "runtime/plan/plan_loader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "runtime/core/file_io.h"
#include "runtime/core/output_path.h"
#include "runtime/core/status_macros.h"
#include "runtime/plan/override_merge.h"
#include "runtime/plan/text_parse.h"

namespace gpipe {
namespace {

// "a.b[2].c" -> "a.b[2]" -> "a.b" -> "a" -> "".
std::string ParentPath(const std::string& path) {
  const size_t cut = path.find_last_of(".[");
  return cut == std::string::npos ? std::string() : path.substr(0, cut);
}

}  // namespace

std::string SourceLocation::ToString() const {
  return absl::StrCat(source, ":", line, ":", column);
}

std::string LoadedPlan::LocationOf(absl::string_view field_path) const {
  for (std::string candidate(field_path); !candidate.empty(); candidate = ParentPath(candidate)) {
    auto it = locations.find(candidate);
    if (it != locations.end()) return it->second.ToString();
  }
  return path;  // nothing on the way up was written: the plan file itself
}

absl::StatusOr<LoadedPlan> ParsePlanText(const std::string& text, const std::string& source_name,
                                         const std::string& directory,
                                         const std::vector<std::string>& overrides) {
  LoadedPlan loaded;
  loaded.path = source_name;
  loaded.directory = directory;
  RETURN_IF_ERROR(ParsePlanWithLocations(text, source_name, &loaded.plan, &loaded.locations));
  for (size_t i = 0; i < overrides.size(); ++i) {
    const std::string source = absl::StrCat("--override[", i + 1, "]");
    pb::Plan override_plan;
    LocationMap override_locations;
    RETURN_IF_ERROR(
        ParsePlanWithLocations(overrides[i], source, &override_plan, &override_locations));
    MergeOverride(override_plan, override_locations, &loaded.plan, &loaded.locations);
  }
  return loaded;
}

absl::StatusOr<LoadedPlan> LoadPlanFile(const std::string& path,
                                        const std::vector<std::string>& overrides) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::NotFoundError(
        absl::StrCat("plan file ", path, " is a directory; pass the path of a .pbtxt plan"));
  }
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || ::access(path.c_str(), R_OK) != 0) {
    // Say which: absent, unreadable, or a symlink loop (not "does not exist" for all three).
    return absl::NotFoundError(
        absl::StrCat("cannot read plan file ", path, ": ",
                     errno == ELOOP ? "too many levels of symbolic links (a symlink loop)"
                                    : std::strerror(errno)));
  }
  // A device or FIFO could be read forever (/dev/zero) or block (a FIFO nobody writes).
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("plan file ", path, " is ",
                                                   FileKindName(info.st_mode),
                                                   ", not a regular file; pass a .pbtxt plan"));
  }
  if (info.st_size > kMaxPlanBytes) {
    return absl::InvalidArgumentError(absl::StrCat("plan file ", path, " is ", info.st_size,
                                                   " bytes; plans are at most ", kMaxPlanBytes));
  }
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) {
    return absl::NotFoundError(
        absl::StrCat("cannot read plan file ", path, ": ", text.status().message()));
  }
  // (Not `directory = "."` after the fact: GCC 12 warns, wrongly, of an overlapping memcpy.)
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string directory = parent.empty() ? std::string(".") : parent.string();
  return ParsePlanText(*text, path, directory, overrides);
}

}  // namespace gpipe
