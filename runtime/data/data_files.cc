#include "runtime/data/data_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "google/protobuf/text_format.h"
#include "zlib.h"

namespace gpipe {
namespace {

constexpr int kPieces = 16;
constexpr int64_t kPieceBytes = int64_t{64} << 10;

void Add(std::vector<FileRole>& files, const char* field, bool has, const std::string& path) {
  if (has) files.push_back(FileRole{.role = field, .path = path});
}

// Closes a file descriptor on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::StatusOr<std::string> FileFingerprint(const FileRole& file) {
  const Fd fd(::open(file.path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat info;
  if (fd.get() < 0 || ::fstat(fd.get(), &info) != 0) {
    return absl::NotFoundError(
        absl::StrCat(file.role, ": ", file.path, ": cannot read it (", std::strerror(errno), ")"));
  }
  const int64_t size = info.st_size;
  uLong crc = ::crc32(0L, Z_NULL, 0);
  std::vector<unsigned char> piece(kPieceBytes);
  // Pieces start evenly over [0, size - piece]: the first at 0, the last ending at the end.
  const int64_t span = std::max<int64_t>(size - kPieceBytes, 0);
  for (int i = 0; i < kPieces; ++i) {
    const int64_t offset = span * i / (kPieces - 1);
    const int64_t want = std::min(kPieceBytes, size - offset);
    if (want <= 0) break;
    ssize_t got = 0;
    while (got < want) {  // pread may return less than asked, or be interrupted
      const ssize_t n =
          ::pread(fd.get(), piece.data() + got, static_cast<size_t>(want - got), offset + got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += n;
    }
    if (got != want) {
      return absl::DataLossError(absl::StrCat(
          file.role, ": ", file.path, ": cannot read ", want, " bytes at offset ", offset,
          got < 0 ? absl::StrCat(" (", std::strerror(errno), ")")
                  : std::string(" (the file is shorter)")));
    }
    crc = ::crc32(crc, piece.data(), static_cast<uInt>(want));
    if (span == 0) break;  // a small file: read whole once
  }
  return absl::StrFormat("%s: %d bytes, crc32 0x%08x", file.role, size, crc);
}

// The held-out split's files (data.npy.eval_*, data.idx.test_*): they do not move the training
// data's position, so a resume may change them.
bool IsHeldOutFile(const FileRole& file) {
  return absl::StrContains(file.role, ".eval_") || absl::StrContains(file.role, ".test_");
}

}  // namespace

std::vector<FileRole> DataFiles(const pb::Plan& plan) {
  std::vector<FileRole> files;
  const pb::Data& data = plan.data();
  switch (data.source_case()) {
    case pb::Data::kNpy:
      Add(files, "data.npy.inputs", data.npy().has_inputs(), data.npy().inputs());
      Add(files, "data.npy.targets", data.npy().has_targets(), data.npy().targets());
      Add(files, "data.npy.eval_inputs", data.npy().has_eval_inputs(), data.npy().eval_inputs());
      Add(files, "data.npy.eval_targets", data.npy().has_eval_targets(), data.npy().eval_targets());
      break;
    case pb::Data::kIdx:
      Add(files, "data.idx.train_images", data.idx().has_train_images(), data.idx().train_images());
      Add(files, "data.idx.train_labels", data.idx().has_train_labels(), data.idx().train_labels());
      Add(files, "data.idx.test_images", data.idx().has_test_images(), data.idx().test_images());
      Add(files, "data.idx.test_labels", data.idx().has_test_labels(), data.idx().test_labels());
      break;
    case pb::Data::kText:
      for (int i = 0; i < data.text().paths_size(); ++i) {
        files.push_back(FileRole{.role = absl::StrCat("data.text.paths[", i, "]"),
                                 .path = data.text().paths(i)});
      }
      break;
    case pb::Data::kTokens:
      Add(files, "data.tokens.path", data.tokens().has_path(), data.tokens().path());
      break;
    case pb::Data::kSynthetic:
    case pb::Data::kCustom:
    case pb::Data::SOURCE_NOT_SET:
      break;
  }
  return files;
}

absl::StatusOr<std::string> DataFingerprint(const pb::Plan& plan) {
  const pb::Data& data = plan.data();
  if (data.has_synthetic() || data.has_custom()) {
    google::protobuf::TextFormat::Printer printer;
    printer.SetSingleLineMode(true);
    std::string settings;
    if (data.has_synthetic()) {
      pb::Synthetic training = data.synthetic();
      training.clear_eval_samples();  // the held-out split may change on a resume
      printer.PrintToString(training, &settings);
      return absl::StrCat("data.synthetic: ", absl::StripTrailingAsciiWhitespace(settings));
    }
    pb::CustomData training = data.custom();
    training.clear_eval_split();
    printer.PrintToString(training, &settings);
    return absl::StrCat("data.custom: ", absl::StripTrailingAsciiWhitespace(settings));
  }
  std::string text;
  for (const FileRole& file : DataFiles(plan)) {
    if (IsHeldOutFile(file)) continue;
    absl::StatusOr<std::string> line = FileFingerprint(file);
    if (!line.ok()) return line.status();
    absl::StrAppend(&text, text.empty() ? "" : "\n", *line);
  }
  return text;
}

}  // namespace gpipe
