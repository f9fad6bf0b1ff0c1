#include "launcher/launcher_output.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {

// At most this many reads of kReadSize bytes per pipe per Pump: a launcher that writes as fast
// as gpipe-run reads must not keep the wait loop (signal forwarding, waitpid) from its turn.
constexpr int kReadsPerPump = 16;
constexpr size_t kReadSize = 4096;

// Writes `text` in pieces of at most PIPE_BUF bytes, each once poll says `fd` takes more (a pipe
// then takes the piece without blocking); while it does not (a reader paused, a terminal
// stopped by Ctrl-S), `waiting` runs every 20 ms. False when the reader is gone (EPIPE) or
// another error stops the writing.
bool WriteAll(int fd, std::string_view text, const std::function<void()>& waiting) {
  while (!text.empty()) {
    pollfd writable{.fd = fd, .events = POLLOUT, .revents = 0};
    const int polled = ::poll(&writable, 1, 20);
    if (polled < 0 && errno != EINTR) return false;
    if (polled <= 0) {
      if (waiting) waiting();
      continue;
    }
    const ssize_t n = ::write(fd, text.data(), std::min<size_t>(text.size(), PIPE_BUF));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

absl::StatusOr<std::pair<int, int>> MakePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  return std::make_pair(fds[0], fds[1]);
}

void Close(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

absl::StatusOr<LauncherOutput> LauncherOutput::Open(bool filter_stderr) {
  auto out = MakePipe();
  if (!out.ok()) return out.status();
  auto err = MakePipe();
  if (!err.ok()) {
    ::close(out->first);
    ::close(out->second);
    return err.status();
  }
  return LauncherOutput(Pipe{out->first, out->second}, Pipe{err->first, err->second},
                        filter_stderr);
}

LauncherOutput::LauncherOutput(LauncherOutput&& other) noexcept
    : out_(std::exchange(other.out_, Pipe{})),
      err_(std::exchange(other.err_, Pipe{})),
      filter_stderr_(other.filter_stderr_),
      filter_(std::move(other.filter_)),
      stdout_gone_(other.stdout_gone_),
      stderr_gone_(other.stderr_gone_),
      while_blocked_(std::move(other.while_blocked_)) {}

LauncherOutput::~LauncherOutput() {
  for (Pipe* pipe : {&out_, &err_}) {
    Close(pipe->read);
    Close(pipe->write);
  }
}

void LauncherOutput::AttachChild() const {
  ::dup2(out_.write, STDOUT_FILENO);
  ::dup2(err_.write, STDERR_FILENO);
}

void LauncherOutput::DetachParent() {
  Close(out_.write);
  Close(err_.write);
}

void LauncherOutput::PassOnStdout(std::string_view text) {
  if (stdout_gone_) return;
  if (WriteAll(STDOUT_FILENO, text, while_blocked_)) return;
  stdout_gone_ = true;
  WriteAll(STDERR_FILENO,
           "gpipe-run: standard output was closed: the job goes on, its output is dropped and "
           "gpipe-run's own lines go to stderr\n",
           while_blocked_);
}

void LauncherOutput::PassOnStderr(std::string_view text) {
  if (!stderr_gone_ && !WriteAll(STDERR_FILENO, text, while_blocked_)) stderr_gone_ = true;
}

bool LauncherOutput::ReadAvailable(Pipe& pipe, bool is_stdout) {
  char buffer[kReadSize];
  for (int reads = 0; reads < kReadsPerPump;) {
    const ssize_t n = ::read(pipe.read, buffer, sizeof(buffer));
    if (n > 0) {
      const std::string_view text(buffer, static_cast<size_t>(n));
      if (is_stdout) {
        PassOnStdout(text);
      } else {
        PassOnStderr(filter_stderr_ ? filter_.Feed(text) : std::string(text));
      }
      ++reads;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    Close(pipe.read);  // end of file (or an error: nothing more will come)
    return false;
  }
  return true;  // more may be there: the next Pump's poll sees it at once
}

bool LauncherOutput::Pump(int wait_ms) {
  pollfd ready[2];
  Pipe* pipes[2];
  nfds_t count = 0;
  for (Pipe* pipe : {&out_, &err_}) {
    if (pipe->read < 0) continue;
    ready[count] = pollfd{.fd = pipe->read, .events = POLLIN, .revents = 0};
    pipes[count++] = pipe;
  }
  if (count == 0) return false;
  const int polled = ::poll(ready, count, wait_ms);
  if (polled == 0 || (polled < 0 && errno == EINTR)) return true;
  if (polled < 0) {
    // poll itself failed: stop reading (the caller then waits with its own sleep) instead of
    // spinning on an error that returns at once.
    Close(out_.read);
    Close(err_.read);
    return false;
  }
  for (nfds_t i = 0; i < count; ++i) {
    if (ready[i].revents != 0) ReadAvailable(*pipes[i], pipes[i] == &out_);
  }
  return out_.read >= 0 || err_.read >= 0;
}

void LauncherOutput::Drain() {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (Pump(20) && std::chrono::steady_clock::now() < until) {
  }
  PassOnStderr(filter_.Finish());
}

}  // namespace gpipe
