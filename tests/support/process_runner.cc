#include "tests/support/process_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <sstream>

namespace gpipe::testing {

ProcessResult RunProcess(const std::vector<std::string>& argv, double timeout_seconds,
                         const ProcessWatcher& watch) {
  ProcessResult result;
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    result.output = "pipe() failed";
    return result;
  }
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    result.output = "fork() failed";
    return result;
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  setpgid(pid, pid);
  fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  char buffer[4096];
  bool open = true;
  int status = 0;
  bool exited = false;
  double exited_at = 0;
  while (true) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // A grandchild that inherited the pipe must not hold the test until the limit: read what
    // arrives for a moment after the child exits, then stop.
    if (exited && elapsed - exited_at > 2.0) break;
    if (elapsed > timeout_seconds) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      exited = true;
      break;
    }
    if (open) {
      pollfd fd{pipe_fds[0], POLLIN, 0};
      poll(&fd, 1, 50);
      while (true) {
        const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
        if (n > 0) {
          result.output.append(buffer, n);
          continue;
        }
        if (n == 0) open = false;
        break;
      }
    } else {
      usleep(10000);
    }
    if (!exited && watch != nullptr) watch(pid, result.output);
    if (!exited && waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      exited_at = elapsed;
      if (!open) break;
    }
    if (exited && !open) break;
  }
  // Drain what is left (non-blocking).
  while (true) {
    const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    result.output.append(buffer, n);
  }
  close(pipe_fds[0]);
  // Stray members of the child's process group must not outlive the test. This does not reach
  // processes that made groups of their own (gpipe-run's launcher and its ranks): a test that
  // may leave those ends them itself (e2e_stop_test's bound test).
  kill(-pid, SIGKILL);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  return result;
}

std::vector<std::string> MpirunPrefix(int np) {
  std::vector<std::string> prefix = {"mpirun", "-np", std::to_string(np)};
  // GPIPE_MPIRUN_FLAGS (set by ctest from the CMake option of that name), or its default.
  const char* flags = std::getenv("GPIPE_MPIRUN_FLAGS");
  std::istringstream words(flags != nullptr ? flags
                                            : "--oversubscribe --bind-to none --mca btl self,vader");
  for (std::string word; words >> word;) prefix.push_back(word);
  // A one-rank job has no other rank to give a second's grace after its SIGTERM, yet mpirun
  // waits that second (and more) after a non-zero exit: a test of an expected failure would spend
  // ~2 s per run waiting (e2e_hostile_input_test: 118 s instead of 25 s). Jobs of more ranks keep
  // mpirun's teardown as users have it, so every rank still says why it stops.
  if (np == 1) prefix.insert(prefix.end(), {"--mca", "odls_base_sigkill_timeout", "0"});
  if (geteuid() == 0) prefix.push_back("--allow-run-as-root");
  return prefix;
}

std::string BinPath(const std::string& name) {
  const char* dir = std::getenv("GPIPE_BIN_DIR");
  return std::string(dir != nullptr ? dir : "bin") + "/" + name;
}

std::string SourcePath(const std::string& relative) {
  const char* dir = std::getenv("GPIPE_SOURCE_DIR");
  return std::string(dir != nullptr ? dir : ".") + "/" + relative;
}

}  // namespace gpipe::testing
