#include "runtime/core/file_io.h"

#include <cerrno>
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

}  // namespace gpipe
