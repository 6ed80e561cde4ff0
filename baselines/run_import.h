// Copying stored cases between databases: the cases of runs in other kvbench databases (shards of
// one suite run, a device's run) become one new run here, row for row - metrics, series,
// histograms and events as their sources stored them - in one transaction, so the new run is
// either whole in the database or absent.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "results_store.h"

namespace kvbench {

struct ImportedCase {
  ResultsStore* source = nullptr;  // opened read-only, at this binary's schema
  std::int64_t case_id = 0;        // in source
};

struct ImportedRun {
  RunInfo info;
  RunStatus status = RunStatus::Complete;
  std::string started_at, ended_at;  // as the sources say (the earliest start, the latest end)
  // Runs of the target that the new run takes the place of, removed in its transaction once its
  // rows are copied: the shard runs of a group merged on the server they were written to, whose
  // cases would otherwise be in the history twice (one a baseline or an acknowledgement names
  // stays).
  std::vector<std::int64_t> replaces;
};

// Throws InputError (the file, field `schema`) for a database at another schema than this
// binary's: its columns could differ, so its rows are imported by the kvbench that wrote it.
void require_current_schema(const ResultsStore& source);

// Returns the new run's id. Checks every source's schema (require_current_schema) before writing
// anything. A source may be the target's own database, opened apart (read-only).
std::int64_t import_run(ResultsStore& target, const ImportedRun& run, const std::vector<ImportedCase>& cases);

// The ids and names of a run's cases, in the order they were stored.
std::vector<std::pair<std::int64_t, std::string>> stored_cases(ResultsStore& store, std::int64_t run_id);

}  // namespace kvbench
