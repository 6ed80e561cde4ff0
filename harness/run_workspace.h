// A run's L2 workspace: the base directories its offloading cases write under - a policy's own
// `memory.l2_dir`, else --l2-dir, else `l2` beside the database (kvbench-results/l2 for a
// server) - checked before the run is stored, and the run's own subdirectories under them
// (kvbench-run-PID-RUNID), which it removes whatever the outcome: a concurrent run's files and
// the directories a user gave are never touched. Each run directory holds a lock file the run
// keeps locked; a killed run's directories (their lock free) are removed by the next run that
// creates one under the same base, and by `kvbench prune`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace kvbench {

// Removes the run directories under `base` whose run is gone (a live run's are kept); returns
// how many.
int remove_stale_run_dirs(const std::string& base);

// The default L2 base for a database: l2/ beside a file, kvbench-results/l2 for a server.
std::string default_l2_base(const std::string& db_path);

class RunWorkspace {
 public:
  // l2_dir_flag: --l2-dir, or empty for the default beside db_path. Throws InputError naming
  // --l2-dir when the flag names no directory.
  RunWorkspace(const std::string& l2_dir_flag, const std::string& db_path);
  ~RunWorkspace() { remove_all(); }
  RunWorkspace(const RunWorkspace&) = delete;
  RunWorkspace& operator=(const RunWorkspace&) = delete;

  // The base every policy without its own l2_dir uses.
  const std::string& default_base() const { return default_base_; }
  // Preflight, for a case that offloads: its policy's own l2_dir (empty: none) must be a
  // directory (InputError(suite_file, field) otherwise), and its base joins bases().
  void plan(const std::string& policy_dir, const std::string& suite_file, const std::string& field);
  // The planned bases, distinct, in first-use order.
  const std::vector<std::string>& bases() const { return bases_; }
  // Creates the default base beside the database when a case planned it (not for --l2-dir,
  // which must exist already).
  void make_default_base() const;
  // Once the run is stored: its subdirectory under every planned base.
  void open(std::int64_t run_id);
  // The run's subdirectory for a policy's own l2_dir (empty: the default base), created on first
  // use - a SoC's own run may cap L1 where the policy does not, so it may need one the preflight
  // did not plan.
  std::string run_dir(const std::string& policy_dir);
  // Removes the run's subdirectories and everything in them.
  void remove_all();

 private:
  std::string create(const std::string& base);
  void create_default_base() const;  // the default base and its parents (not --l2-dir)

  std::string default_base_;
  bool default_is_flag_ = false;
  std::vector<std::string> bases_;
  std::int64_t run_id_ = 0;
  std::map<std::string, std::string> run_dirs_;  // base -> the run's subdirectory
  struct Created {
    std::filesystem::path dir;
    int lock_fd;  // flock'ed: the directory's run is alive
  };
  std::vector<Created> created_;
};

}  // namespace kvbench
