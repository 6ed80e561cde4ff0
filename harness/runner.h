// The runner: a suite is the cartesian product models x workloads x policies x socs; each case
// runs `warmup` unrecorded repetitions, then `repetitions` recorded ones, all with the suite's
// seed (deterministic figures are identical across repetitions). Every repetition is stored as
// soon as it ends, in its own transaction, with how busy the machine was; the run's status
// says whether it finished (complete), lost cases (failed) or was killed (aborted, found by
// the next process that opens the database).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "case_plan.h"
#include "memory/file_io.h"
#include "results_store.h"
#include "soc/soc_profile.h"
#include "store_location.h"
#include "suite_config.h"

namespace kvbench {

struct RunOptions {
  std::string db_path = kDefaultResultsDb;
  // L2 directory of the policies that leave l2_dir empty; it must exist. "": l2/ in
  // store_local_dir(db_path) (beside a database file; kvbench-results/ for a server), created
  // when a policy offloads. Each run writes only inside a subdirectory of
  // its own (kvbench-run-<pid>-<run id>) and removes it when it ends.
  std::string l2_dir;
  std::vector<std::string> tags;
  int repetitions = 0;              // 0: the suite's
  std::string filter;               // ECMAScript regex searched in model/workload/policy/soc
  std::string models_dir;           // "": KVBENCH_MODELS_DIR, else the configure-time default
  bool progress = true;             // on a terminal only
  double heartbeat_s = 30.0;        // in a log: the longest silence inside a repetition (0: none)
  // On a server: seconds without a heartbeat after which readers and writers take the run for
  // abandoned (its writer beats four times as often, from a thread of its own).
  int heartbeat_timeout_s = kDefaultHeartbeatTimeoutS;
  // Every check a run makes before it starts (the suite against the models, scripts, budgets,
  // kernel paths, directories and the database, opened read-only when it exists), then return
  // without running or writing anything.
  bool check_only = false;
  kv::FileIo* l2_io = nullptr;      // tests: the L2 tier's file I/O (fault injection); nullptr: POSIX
  // When it reads true (SIGINT/SIGTERM), the repetition in flight is dropped, the case failed
  // with "interrupted" and the run stored as interrupted.
  const std::atomic<bool>* stop = nullptr;
  // SoC profiles by name that take the place of the built-in ones (tests price with made-up SoCs).
  std::map<std::string, kv::soc::SocProfile> profiles;
  // --shard I/N: run only the I-th of N balanced parts of the suite (shard_selection.h), tagged
  // run-group=<run_group> so `kvbench merge` can join the parts; balanced by the case times of
  // the suite's previous run in balance_from ("": db_path).
  std::optional<Shard> shard;
  std::string run_group;
  std::string balance_from;
  // --soc NAME: this machine is the SoC of the built-in profile NAME (a board): its measured
  // cases (soc "host") are priced with that profile instead of the host's calibration, and the
  // run's metadata says so (device_soc), for validate-model and the report's cross-SoC section.
  std::string device_soc;
};

struct RunSummary {
  std::int64_t run_id = 0;
  RunStatus status = RunStatus::Running;
  std::string db;
  int cases = 0;
  int skipped = 0;
  int failed = 0;
  int degraded = 0;  // complete cases whose engine degraded (L2 faults, danger, requantization, overflow)
  bool interrupted = false;
  int stored_repetitions = 0;  // recorded repetitions in the database, over every case
  StoreWrites store_writes;    // the time the store took to write the repetitions (host clock)
  struct CaseLine {
    std::string name;
    std::string status;  // complete, skipped, failed
    std::string note;    // skip reason or error
  };
  std::vector<CaseLine> lines;
};

// --models-dir, else $KVBENCH_MODELS_DIR, else the repository's models/.
std::string resolve_models_dir(const std::string& flag);

struct RunInterrupted : std::runtime_error {
  RunInterrupted() : std::runtime_error("interrupted before the run started; nothing was stored") {}
};

// Validates everything that can be checked before running (models load, texts exist, windows
// fit the models, the L2 directory exists) - an InputError leaves the database untouched - then
// runs and stores. Throws RunInterrupted when stopped before anything was stored.
RunSummary run_suite(const SuiteConfig& suite, const RunOptions& options);

}  // namespace kvbench
