#include "callgrind_tool.h"

#include <fcntl.h>
#include <sys/personality.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "sim_regions.h"

namespace kvbench::sim {

std::string CacheGeometry::option() const { return fmt::format("--{}={},{},{}", name, bytes, ways, line_bytes); }

std::string CacheGeometry::text() const {
  const std::string size = bytes >= (1u << 20) ? fmt::format("{} MiB", bytes >> 20) : fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} {}-way, {}-byte lines", size, ways, line_bytes);
}

std::vector<std::string> callgrind_arguments(const std::string& out_file) {
  return {"--tool=callgrind",
          "--collect-atstart=no",
          "--toggle-collect=" + std::string(kv::sim::kRegionPattern),
          "--cache-sim=yes",
          "--branch-sim=no",
          kSimI1.option(),
          kSimD1.option(),
          kSimLL.option(),
          "--compress-strings=no",
          "--compress-pos=no",
          "--separate-threads=no",
          "--callgrind-out-file=" + out_file};
}

std::optional<std::string> valgrind_version() {
  int pipe_fd[2];
  if (::pipe(pipe_fd) != 0) return std::nullopt;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipe_fd[0]);
    ::close(pipe_fd[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    ::dup2(pipe_fd[1], STDOUT_FILENO);
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, STDERR_FILENO);
    ::close(pipe_fd[0]);
    ::close(pipe_fd[1]);
    ::execlp("valgrind", "valgrind", "--version", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(pipe_fd[1]);
  std::string out;
  char buffer[256];
  for (ssize_t n; (n = ::read(pipe_fd[0], buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<std::size_t>(n));
  ::close(pipe_fd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || out.rfind("valgrind-", 0) != 0) return std::nullopt;
  return out;
}

ChildExit run_child(const ChildProcess& child) {
  if (child.argv.empty()) throw std::logic_error("run_child: no program");
  std::vector<char*> argv, env;
  for (const std::string& a : child.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : child.env) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  const int log = ::open(child.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) throw std::runtime_error(fmt::format("{}: cannot create the child's log: {}", child.log, std::strerror(errno)));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log);
    throw std::runtime_error(fmt::format("cannot start {}: fork failed: {}", child.argv[0], std::strerror(errno)));
  }
  if (pid == 0) {
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    if (!child.dir.empty() && ::chdir(child.dir.c_str()) != 0) ::_exit(126);
    // Without address-space randomisation the child's memory lies where it lay last time, and
    // the simulated caches see the same addresses (a refusal leaves it randomised).
    if (child.fixed_addresses) ::personality(ADDR_NO_RANDOMIZE);
    ::execvpe(argv[0], argv.data(), env.data());
    ::_exit(127);
  }
  ::close(log);
  ChildExit exit;
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) throw std::runtime_error(fmt::format("waiting for {}: {}", child.argv[0], std::strerror(errno)));
    if (child.stop != nullptr && child.stop->load() && !exit.stopped) {
      exit.stopped = true;
      ::kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) exit.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
  return exit;
}

std::string file_tail(const std::string& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string out;
  for (const std::string& line : last) out += (out.empty() ? "" : "\n") + line;
  return out;
}

}  // namespace kvbench::sim
