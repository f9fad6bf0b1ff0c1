// LauncherReportFilter: what gpipe-run lets through of mpirun's stderr. Open MPI frames its own
// reports in lines of dashes; when a job fails it adds a multi-line banner ("Primary job
// terminated normally, but 1 process returned a non-zero exit code. Per user-direction, the
// job has been aborted.", or "mpirun detected that one or more processes exited with non-zero
// status ...") that says nothing the ranks' gpipe error lines do not. The filter drops those
// banners, turns the report of a rank ended by a signal ("mpirun noticed that process rank 1
// ... exited on signal 9 (Killed).") into one `gpipe-run:` line, and passes everything else on
// unchanged: the ranks' lines at once (also inside a frame) and any other framed report whole.
// Pure and single-threaded: feed it bytes as they arrive, Finish() at the end.
#ifndef GPIPE_LAUNCHER_LAUNCHER_REPORT_FILTER_H_
#define GPIPE_LAUNCHER_LAUNCHER_REPORT_FILTER_H_

#include <string>
#include <string_view>
#include <vector>

namespace gpipe {

class LauncherReportFilter {
 public:
  // The text of `bytes` to write now (whole lines; a partial line waits for its end).
  std::string Feed(std::string_view bytes);
  // What is left: a partial last line, or a frame that never closed, as it came.
  std::string Finish();

 private:
  std::string Line(std::string line);  // one whole line, with its '\n'
  std::string CloseFrame();            // the judged frame, its closing dashes seen

  std::string partial_;  // bytes after the last '\n'
  bool in_frame_ = false;
  std::vector<std::string> frame_;  // the frame's lines, opening dashes first
};

}  // namespace gpipe

#endif  // GPIPE_LAUNCHER_LAUNCHER_REPORT_FILTER_H_
