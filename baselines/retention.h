// Retention: which old runs a results database can let go, and removing them.
//
// A run goes when it started at least `older_than_days` days ago and nothing keeps it. What
// keeps a run:
// - it is `running` (its process is alive; a writer has already marked dead ones aborted);
// - a baseline names it, or an acknowledgement names it as its run or its baseline;
// - it is one of the newest `keep_per_suite` complete runs of its suite (whatever their age);
// - it is the baseline of a gate verdict whose candidate is kept for one of the reasons above,
//   so that every such run keeps its verdicts (one step: a run kept only for this reason does
//   not keep the baselines of its own verdicts).
// A verdict stays when both its runs stay. Removing a run removes its cases, their metrics,
// series, histograms and events, its verdicts and its change points.
//
// plan_prune() decides from the runs and their references alone; apply_prune() removes what a
// plan names in one transaction (checking again, inside it, that no baseline, acknowledgement
// or live process holds a run), then reclaims the space (VACUUM, outside the transaction).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "results_store.h"

namespace kvbench {

struct PruneOptions {
  int older_than_days = 0;  // runs started at least this many days before `now` are old
  int keep_per_suite = 5;   // the newest N complete runs of each suite stay, however old
  std::string now;          // "": the current time; else as the store writes times
};

struct RetentionRun {
  std::int64_t id = 0;
  std::string suite, status, started_at;  // status as reported (a dead `running` run reads aborted)
  std::vector<std::string> held_by;       // "baseline nightly/main", "acknowledgement 3"
};

struct RetentionInput {
  std::vector<RetentionRun> runs;                            // by id
  std::vector<std::pair<std::int64_t, std::int64_t>> verdicts;  // (baseline run, candidate run)
};

// Every run of the store with what holds it, and every verdict's pair of runs.
RetentionInput read_retention_input(ResultsStore& store);

struct KeptRun {
  RetentionRun run;
  std::string why;
};

struct PrunePlan {
  std::string cutoff;               // runs started at or before it are old
  std::vector<RetentionRun> remove;  // by id
  std::vector<KeptRun> kept_old;     // old runs that stay, and why
};

// Throws kv::InputError for negative days or keep, or a `now` that is not a store time.
PrunePlan plan_prune(const RetentionInput& input, const PruneOptions& options);

struct PruneResult {
  std::vector<RetentionRun> removed;
  std::vector<RetentionRun> spared;  // planned, but held by the time of removal
  std::vector<std::pair<std::string, std::int64_t>> rows_removed;  // (table, rows)
  std::uint64_t bytes_before = 0, bytes_after = 0;  // the database file with its WAL
  std::string vacuum_error;  // "" : the space was reclaimed; a later prune reclaims it otherwise
};

// Needs a store opened for writing.
PruneResult apply_prune(ResultsStore& store, const PrunePlan& plan);

// Whether a baseline or an acknowledgement names run `run_id` (such a run is kept).
bool run_held(ResultsStore& store, std::int64_t run_id);

// Inside the caller's write transaction: every row of run `run_id` (its cases' figures, cases,
// verdicts, change points, then the run; baselines and acknowledgements naming it go with it);
// returns the rows removed per table.
std::vector<std::pair<std::string, std::int64_t>> remove_run_rows(ResultsStore& store, std::int64_t run_id);

// The database's size in bytes: a file's with its WAL, a server database's as the server counts it.
std::uint64_t database_bytes(ResultsStore& store);
// The size of a database file and its WAL, in bytes.
std::uint64_t database_file_bytes(const std::string& path);

}  // namespace kvbench
