// Typed reads of the results store, for everything that compares runs: run records and
// selectors, per-repetition metric samples, baselines and verdicts. The SQL lives here and in
// results_store.cpp and run_view.cpp, nowhere else.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comparison.h"
#include "results_store.h"

namespace kvbench {

struct RunRecord {
  std::int64_t id = 0;
  std::string status;  // as reported: a running run whose process is gone reads aborted
  std::string started_at, ended_at, suite, git_sha, config_hash, config_json, meta_json;
  bool git_dirty = false;
  std::vector<std::string> tags;
  int cases = 0;
};

struct RunFilter {
  std::string status, suite;
  std::vector<std::string> tags;  // every one
  std::string since, until;       // started_at in [since, until] (ISO 8601 UTC; "" open)
  int last = 0;                   // the newest N (0: all)
};

std::vector<RunRecord> list_runs(ResultsStore& store, const RunFilter& filter = {});
// A string field of the run's meta_json; "" where the metadata is missing, malformed or holds
// something else there.
std::string run_meta_text(const RunRecord& run, const char* key);
// Throws kv::InputError (the file, `what`) for a run the database does not hold.
RunRecord get_run(ResultsStore& store, std::int64_t id, const std::string& what = "RUN_ID");

// A run selector: an id, `latest`, `latest:TAG`, `latest:suite=NAME`, or a baseline name.
// `flag` names the argument in errors.
std::int64_t resolve_run(ResultsStore& store, const std::string& selector, const std::string& flag);
// The help text of an argument that takes a run selector.
inline constexpr const char* kRunSelectorHelp =
    "the run: an id, latest (the newest complete run), latest:TAG, latest:suite=NAME or a baseline name";

struct CaseSamples {
  std::string name, model, workload, policy, soc, status;
  // Keyed by metric key (metric_key: the name on its own clock, name@model on another).
  std::map<std::string, std::vector<Sample>> samples;  // key -> its values per repetition
  std::map<std::string, std::string> na_reason;        // key -> why it has no value
};
std::vector<CaseSamples> load_samples(ResultsStore& store, std::int64_t run_id);

// A run's stored repetitions of cases with host figures, and how many of them were flagged noisy
// (some host figure marked noisy: the engine's threads waited for a core, a core slowed down or
// started hot). A sim run's, whose host figures are NULL, has none noisy.
struct RepetitionNoise {
  int repetitions = 0;
  int noisy = 0;
  bool mostly_noisy() const { return repetitions > 0 && 2 * noisy > repetitions; }
};
RepetitionNoise repetition_noise(ResultsStore& store, std::int64_t run_id);

// Every stored metric of a run, for export: the rows of metric_values, and the cases with theirs.
struct MetricRow {
  std::string case_name, model, workload, policy, soc;
  int repetition = 1;
  std::string name;
  std::optional<double> value;
  std::string na_reason, unit, clock;
  bool extrapolated = false, noisy = false;
};
struct CaseRecord {
  std::string name, model, workload, policy, soc, status, skipped_reason, error;
  std::vector<MetricRow> metrics;  // by repetition, then name
};
std::vector<CaseRecord> load_cases(ResultsStore& store, std::int64_t run_id);

// A case's per-step series and its events, for one repetition (the recorder's names).
std::map<std::string, std::vector<double>> load_series(ResultsStore& store, std::int64_t run_id, const std::string& case_name,
                                                       int repetition);
std::vector<RunEvent> load_events(ResultsStore& store, std::int64_t run_id, const std::string& case_name, int repetition);
std::map<std::string, std::vector<std::int64_t>> load_histograms(ResultsStore& store, std::int64_t run_id, const std::string& case_name,
                                                                 int repetition);

struct VerdictRow {
  std::int64_t id = 0, baseline_run = 0, candidate_run = 0;
  std::string created_at, outcome;
  int regressed = 0, improved = 0, inconclusive = 0;
  std::string rows_json;
};
// Every stored gate verdict whose candidate is `candidate_run` (0: all), oldest first.
std::vector<VerdictRow> list_verdicts(ResultsStore& store, std::int64_t candidate_run = 0);

struct AckRow {
  std::int64_t id = 0, run_id = 0, baseline_run = 0;
  std::string case_glob, metric_glob, reason, created_at, expires_at;
};
std::vector<AckRow> list_acks(ResultsStore& store);

struct ChangePointRow {
  std::int64_t id = 0, run_id = 0;
  std::string case_name, metric, detected_at, detail;
  std::optional<double> before, after;
};
std::vector<ChangePointRow> list_change_points(ResultsStore& store);

struct BaselineRecord {
  std::string name;
  std::int64_t run_id = 0;
  std::string set_at, reason;
};
// Empty on a database older than version 4 (no baselines there yet).
std::vector<BaselineRecord> list_baselines(ResultsStore& store);
std::optional<BaselineRecord> find_baseline(ResultsStore& store, const std::string& name);

}  // namespace kvbench
