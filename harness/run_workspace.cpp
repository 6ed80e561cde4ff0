#include "run_workspace.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "runtime/error.h"
#include "store_location.h"

namespace kvbench {

namespace fs = std::filesystem;

namespace {

// l2/ in the store's local directory: beside a database file ("l2" for one named without a
// directory), in kvbench-results/ for a server.
std::string default_l2_base(const std::string& db_path) {
  if (!is_postgres_uri(db_path) && !fs::path(db_path).has_parent_path()) return "l2";
  return (store_local_dir(db_path) / "l2").string();
}

}  // namespace

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
  const fs::path dir = fs::path(base) / fmt::format("kvbench-run-{}-{}", ::getpid(), run_id_);
  std::error_code ec;
  if (!fs::create_directory(dir, ec)) {
    throw kv::InputError(base, "l2_dir",
                         fmt::format("cannot create the run's L2 directory {}: {}", dir.string(), ec ? ec.message() : "it already exists"));
  }
  created_.push_back(dir);
  return dir.string();
}

void RunWorkspace::remove_all() {
  for (const fs::path& dir : created_) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  created_.clear();
  run_dirs_.clear();
}

}  // namespace kvbench
