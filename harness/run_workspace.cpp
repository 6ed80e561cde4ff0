#include "run_workspace.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "runtime/error.h"
#include "store_location.h"

namespace kvbench {

namespace fs = std::filesystem;

// l2/ in the store's local directory: beside a database file ("l2" for one named without a
// directory), in kvbench-results/ for a server.
std::string default_l2_base(const std::string& db_path) {
  if (!is_postgres_uri(db_path) && !fs::path(db_path).has_parent_path()) return "l2";
  return (store_local_dir(db_path) / "l2").string();
}

namespace {

constexpr const char* kRunDirPrefix = "kvbench-run-";

// A run directory whose run is gone: its lock (held by the run for as long as it lives) can be
// taken. Where the lock is free but its pid runs and the lock file is new, a run may be between
// making its directory and locking it, so the directory stays. A directory without a lock file
// (an older build's) is stale when the pid in its name is not running.
bool run_dir_is_stale(const fs::path& dir) {
  const std::string name = dir.filename().string();
  const long pid = std::strtol(name.c_str() + std::strlen(kRunDirPrefix), nullptr, 10);
  const bool pid_gone = pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
  const fs::path lock = dir / "lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return pid_gone;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  if (!free) return false;
  if (pid_gone) return true;
  std::error_code ec;
  const auto written = fs::last_write_time(lock, ec);
  return !ec && fs::file_time_type::clock::now() - written > std::chrono::minutes(1);
}

}  // namespace

int remove_stale_run_dirs(const std::string& base) {
  int removed_dirs = 0;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(base, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kRunDirPrefix, 0) != 0 || !entry.is_directory(ec)) continue;
    std::error_code removed;
    if (run_dir_is_stale(entry.path()) && fs::remove_all(entry.path(), removed) > 0 && !removed) ++removed_dirs;
  }
  return removed_dirs;
}

RunWorkspace::RunWorkspace(const std::string& l2_dir_flag, const std::string& db_path) {
  default_is_flag_ = !l2_dir_flag.empty();
  default_base_ = default_is_flag_ ? l2_dir_flag : default_l2_base(db_path);
  if (default_is_flag_) {
    std::error_code ec;
    const fs::file_status status = fs::status(l2_dir_flag, ec);
    if (!fs::exists(status)) throw kv::InputError(l2_dir_flag, "--l2-dir", "does not exist");
    if (!fs::is_directory(status)) throw kv::InputError(l2_dir_flag, "--l2-dir", "is not a directory");
  }
}

void RunWorkspace::plan(const std::string& policy_dir, const std::string& suite_file, const std::string& field) {
  const std::string& base = policy_dir.empty() ? default_base_ : policy_dir;
  if (std::find(bases_.begin(), bases_.end(), base) == bases_.end()) bases_.push_back(base);
  // Checked before the run is stored: never a failed run row for a path a user can fix.
  if (!policy_dir.empty()) {
    std::error_code ec;
    if (!fs::is_directory(policy_dir, ec)) {
      throw kv::InputError(suite_file, field,
                           std::string(fs::exists(policy_dir, ec) ? "is not a directory" : "does not exist") + " (" + policy_dir + ")");
    }
  }
}

void RunWorkspace::create_default_base() const {
  std::error_code ec;
  fs::create_directories(default_base_, ec);
  if (ec) throw kv::InputError(default_base_, "l2_dir", "cannot create the L2 directory beside the database: " + ec.message());
}

void RunWorkspace::make_default_base() const {
  if (default_is_flag_ || std::find(bases_.begin(), bases_.end(), default_base_) == bases_.end()) return;
  create_default_base();
  if (!fs::is_directory(default_base_)) {
    throw kv::InputError(default_base_, "l2_dir", "is not a directory (the L2 directory beside the database)");
  }
}

void RunWorkspace::open(std::int64_t run_id) {
  run_id_ = run_id;
  for (const std::string& base : bases_) run_dirs_[base] = create(base);
}

std::string RunWorkspace::run_dir(const std::string& policy_dir) {
  const std::string& base = policy_dir.empty() ? default_base_ : policy_dir;
  if (auto it = run_dirs_.find(base); it != run_dirs_.end()) return it->second;
  if (base == default_base_ && !default_is_flag_) create_default_base();
  return run_dirs_[base] = create(base);
}

std::string RunWorkspace::create(const std::string& base) {
  // A killed run (SIGKILL, an OOM kill) removed nothing: its directories go now.
  remove_stale_run_dirs(base);
  const fs::path dir = fs::path(base) / fmt::format("{}{}-{}", kRunDirPrefix, ::getpid(), run_id_);
  std::error_code ec;
  if (!fs::create_directory(dir, ec)) {
    throw kv::InputError(base, "l2_dir",
                         fmt::format("cannot create the run's L2 directory {}: {}", dir.string(), ec ? ec.message() : "it already exists"));
  }
  // Held until the run removes the directory; when the process dies the kernel frees it.
  const int fd = ::open((dir / "lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string reason = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    fs::remove_all(dir, ec);
    throw kv::InputError(base, "l2_dir", fmt::format("cannot lock the run's L2 directory {}: {}", dir.string(), reason));
  }
  created_.push_back({dir, fd});
  return dir.string();
}

void RunWorkspace::remove_all() {
  for (const Created& created : created_) {
    std::error_code ec;
    fs::remove_all(created.dir, ec);
    ::close(created.lock_fd);
  }
  created_.clear();
  run_dirs_.clear();
}

}  // namespace kvbench
