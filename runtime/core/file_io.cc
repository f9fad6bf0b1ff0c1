#include "runtime/core/file_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace gpipe {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (error) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", error.message()));
  }
  std::ifstream file(path, std::ios::binary);
  std::string bytes(size, '\0');
  if (!file || !file.read(bytes.data(), static_cast<std::streamsize>(size))) {
    return absl::DataLossError(absl::StrCat("reading ", path, " failed: ", std::strerror(errno)));
  }
  return bytes;
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  const std::string tmp_path = absl::StrCat(path, ".tmp");
  {
    std::ofstream file(tmp_path, std::ios::binary | std::ios::trunc);
    if (file) file.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    file.flush();
    if (!file) {
      const std::string reason = std::strerror(errno);
      std::remove(tmp_path.c_str());
      return absl::DataLossError(absl::StrCat("writing ", path, " failed: ", reason));
    }
  }
  if (std::rename(tmp_path.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(tmp_path.c_str());
    return absl::DataLossError(absl::StrCat("writing ", path, " failed (rename): ", reason));
  }
  return absl::OkStatus();
}

}  // namespace gpipe
