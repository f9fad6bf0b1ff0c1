#include "launcher/launcher_report_filter.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace gpipe {
namespace {

// Open MPI's frame: a line of dashes only (74 of them in Open MPI 4; any run of 20 or more).
bool IsFrameLine(absl::string_view line) {
  line = absl::StripSuffix(line, "\n");
  return line.size() >= 20 && line.find_first_not_of('-') == absl::string_view::npos;
}

// A line a rank wrote, which mpirun forwards: never held back.
bool IsRankLine(absl::string_view line) { return absl::StartsWith(line, "[gpipe "); }

}  // namespace

std::string LauncherReportFilter::Feed(std::string_view bytes) {
  std::string out;
  partial_.append(bytes);
  size_t start = 0;
  for (size_t end; (end = partial_.find('\n', start)) != std::string::npos; start = end + 1) {
    out += Line(partial_.substr(start, end + 1 - start));
  }
  partial_.erase(0, start);
  return out;
}

std::string LauncherReportFilter::Finish() {
  std::string out = absl::StrJoin(frame_, "");
  frame_.clear();
  in_frame_ = false;
  out += partial_;
  partial_.clear();
  return out;
}

std::string LauncherReportFilter::Line(std::string line) {
  if (!in_frame_) {
    if (!IsFrameLine(line)) return line;
    in_frame_ = true;
    frame_.push_back(std::move(line));
    return "";
  }
  if (IsRankLine(line)) return line;
  frame_.push_back(std::move(line));
  return IsFrameLine(frame_.back()) ? CloseFrame() : "";
}

std::string LauncherReportFilter::CloseFrame() {
  // The text between the dashes, as one line.
  std::string text;
  for (size_t i = 1; i + 1 < frame_.size(); ++i) {
    absl::StrAppend(&text, text.empty() ? "" : " ", absl::StripAsciiWhitespace(frame_[i]));
  }
  std::string out;
  if (absl::StrContains(text, "terminated normally") && absl::StrContains(text, "aborted")) {
    // "Primary job terminated normally, but N process returned a non-zero exit code ..."
  } else if (absl::StartsWith(text, "mpirun detected that one or more processes exited")) {
    // The same banner in its other wording.
  } else if (absl::StartsWith(text, "mpirun noticed that process rank")) {
    out = absl::StrCat("gpipe-run: ", text, "\n");
  } else {
    out = absl::StrJoin(frame_, "");
  }
  frame_.clear();
  in_frame_ = false;
  return out;
}

}  // namespace gpipe
