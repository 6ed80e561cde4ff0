#include "retention.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "results_reader.h"
#include "runtime/error.h"
#include "sql_query.h"

namespace kvbench {

namespace {

constexpr const char* kTimeFormat = "%Y-%m-%dT%H:%M:%SZ";

std::time_t parse_store_time(const std::string& text) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), kTimeFormat, &tm);
  if (end == nullptr || *end != '\0') throw kv::InputError("prune", "now", "'" + text + "' is not a time like 2026-12-01T20:49:34Z");
  return timegm(&tm);
}

std::string store_time(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, kTimeFormat, &tm);
  return buffer;
}

// `days` before `now`; the epoch when that is earlier.
std::string cutoff_time(const std::string& now, int days) {
  const std::time_t at = parse_store_time(now.empty() ? now_utc() : now);
  const auto span = static_cast<std::int64_t>(days) * 86400;
  return store_time(at - span < 0 ? 0 : static_cast<std::time_t>(at - span));
}

// Why a run stays whatever its age ("" : nothing holds it).
std::string held_reason(const RetentionRun& run) {
  if (run.status == "running") return "running";
  if (!run.held_by.empty()) {
    std::string why;
    for (const std::string& by : run.held_by) why += (why.empty() ? "" : ", ") + by;
    return why;
  }
  return "";
}

// The ids of each suite's newest `keep` complete runs.
std::set<std::int64_t> newest_complete(const std::vector<RetentionRun>& runs, int keep) {
  std::map<std::string, std::vector<const RetentionRun*>> by_suite;
  for (const RetentionRun& r : runs) {
    if (r.status == "complete") by_suite[r.suite].push_back(&r);
  }
  std::set<std::int64_t> ids;
  for (auto& [suite, list] : by_suite) {
    std::sort(list.begin(), list.end(), [](const RetentionRun* a, const RetentionRun* b) {
      return std::tie(a->started_at, a->id) > std::tie(b->started_at, b->id);
    });
    for (std::size_t i = 0; i < list.size() && i < static_cast<std::size_t>(keep); ++i) ids.insert(list[i]->id);
  }
  return ids;
}

std::int64_t run_delete(ResultsStore& store, const char* sql, std::int64_t run_id) {
  Query q(store, sql);
  q.bind(1, run_id);
  return q.run_counting_changes();
}

// Every row that refers to a run, children first, then the run. The order matters: with
// foreign keys on, a run cannot go while a row still names it.
constexpr std::pair<const char*, const char*> kRunRows[] = {
    {"metrics", "DELETE FROM metrics WHERE case_id IN (SELECT id FROM cases WHERE run_id = ?1)"},
    {"series", "DELETE FROM series WHERE case_id IN (SELECT id FROM cases WHERE run_id = ?1)"},
    {"histograms", "DELETE FROM histograms WHERE case_id IN (SELECT id FROM cases WHERE run_id = ?1)"},
    {"events", "DELETE FROM events WHERE case_id IN (SELECT id FROM cases WHERE run_id = ?1)"},
    {"cases", "DELETE FROM cases WHERE run_id = ?1"},
    {"verdicts", "DELETE FROM verdicts WHERE baseline_run = ?1 OR candidate_run = ?1"},
    {"change_points", "DELETE FROM change_points WHERE run_id = ?1"},
    {"runs", "DELETE FROM runs WHERE id = ?1"},
};

// Inside the transaction: whether a run may still go (not running, held by no baseline or
// acknowledgement).
bool still_removable(ResultsStore& store, std::int64_t run_id) {
  Query q(store, "SELECT status != 'running' FROM runs WHERE id = ?1");
  q.bind(1, run_id);
  return q.step() && q.int64(0) != 0 && !run_held(store, run_id);
}

void exec(ResultsStore& store, const char* sql) { store.connection().exec(sql); }

std::int64_t pragma_value(ResultsStore& store, const char* sql) {
  Query q(store, sql);
  return q.step() ? q.int64(0) : 0;
}

}  // namespace

bool run_held(ResultsStore& store, std::int64_t run_id) {
  Query q(store,
          "SELECT EXISTS (SELECT 1 FROM baselines WHERE run_id = ?1) OR EXISTS (SELECT 1 FROM acks WHERE run_id = ?1 OR baseline_run = ?1)");
  q.bind(1, run_id);
  return q.step() && q.int64(0) != 0;
}

std::vector<std::pair<std::string, std::int64_t>> remove_run_rows(ResultsStore& store, std::int64_t run_id) {
  std::vector<std::pair<std::string, std::int64_t>> rows;
  for (const auto& [table, sql] : kRunRows) rows.emplace_back(table, run_delete(store, sql, run_id));
  return rows;
}

RetentionInput read_retention_input(ResultsStore& store) {
  RetentionInput input;
  std::map<std::int64_t, std::vector<std::string>> held;
  for (const BaselineRecord& b : list_baselines(store)) held[b.run_id].push_back("baseline " + b.name);
  for (const AckRow& a : list_acks(store)) {
    held[a.run_id].push_back(fmt::format("acknowledgement {}", a.id));
    if (a.baseline_run != a.run_id) held[a.baseline_run].push_back(fmt::format("baseline of acknowledgement {}", a.id));
  }
  for (const RunRecord& r : list_runs(store)) input.runs.push_back({r.id, r.suite, r.status, r.started_at, held[r.id]});
  if (store.schema_version() >= 4) {  // verdicts came with version 4; their rows are not read
    Query q(store, "SELECT baseline_run, candidate_run FROM verdicts ORDER BY id");
    while (q.step()) input.verdicts.emplace_back(q.int64(0), q.int64(1));
  }
  return input;
}

PrunePlan plan_prune(const RetentionInput& input, const PruneOptions& options) {
  if (options.older_than_days < 0) {
    throw kv::InputError("--older-than", std::to_string(options.older_than_days), "not a whole number of days, 0 or more");
  }
  if (options.keep_per_suite < 0) throw kv::InputError("--keep", std::to_string(options.keep_per_suite), "not a whole number, 0 or more");
  PrunePlan plan;
  plan.cutoff = cutoff_time(options.now, options.older_than_days);
  const std::set<std::int64_t> newest = newest_complete(input.runs, options.keep_per_suite);
  // First the reasons a run stays on its own account; `primary` holds the runs kept so.
  std::map<std::int64_t, std::string> why;
  std::set<std::int64_t> primary;
  for (const RetentionRun& r : input.runs) {
    std::string reason = held_reason(r);
    if (reason.empty() && r.started_at > plan.cutoff) reason = "newer than the cutoff";
    if (reason.empty() && newest.count(r.id) > 0) reason = fmt::format("one of the newest {} complete runs of its suite", options.keep_per_suite);
    if (!reason.empty()) {
      why[r.id] = reason;
      primary.insert(r.id);
    }
  }
  // Then the baselines of those runs' verdicts.
  for (const auto& [baseline, candidate] : input.verdicts) {
    if (primary.count(candidate) > 0 && why.count(baseline) == 0) why[baseline] = fmt::format("baseline of run {}'s gate verdict", candidate);
  }
  for (const RetentionRun& r : input.runs) {
    const auto kept = why.find(r.id);
    if (kept == why.end()) plan.remove.push_back(r);
    else if (r.started_at <= plan.cutoff) plan.kept_old.push_back({r, kept->second});
  }
  return plan;
}

std::uint64_t database_bytes(ResultsStore& store) {
  if (store.on_server()) {
    Query size(store, "SELECT pg_database_size(current_database())");
    return size.step() ? static_cast<std::uint64_t>(size.int64(0)) : 0;
  }
  return database_file_bytes(store.path());
}

std::uint64_t database_file_bytes(const std::string& path) {
  std::uint64_t bytes = 0;
  for (const std::string& file : {path, path + "-wal"}) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(file, ec);
    if (!ec) bytes += size;
  }
  return bytes;
}

PruneResult apply_prune(ResultsStore& store, const PrunePlan& plan) {
  if (store.access() != Access::ReadWrite) throw std::logic_error("apply_prune: the store is read-only");
  PruneResult result;
  // A run whose process died since the store was opened reads `running` until marked.
  store.mark_abandoned_runs();
  const bool file = !store.on_server();
  if (file) exec(store, "PRAGMA wal_checkpoint(TRUNCATE)");
  result.bytes_before = database_bytes(store);
  std::map<std::string, std::int64_t> rows;
  {
    WriteTransaction tx(store);
    for (const RetentionRun& run : plan.remove) {
      if (!still_removable(store, run.id)) {
        result.spared.push_back(run);
        continue;
      }
      for (const auto& [table, n] : remove_run_rows(store, run.id)) rows[table] += n;
      result.removed.push_back(run);
    }
    tx.commit();
  }
  for (const auto& [table, sql] : kRunRows) result.rows_removed.emplace_back(table, rows[table]);
  // VACUUM cannot run inside a transaction. Free pages left by earlier deletions are reclaimed
  // too, so a prune whose VACUUM was interrupted finishes the next time.
  // The removal is committed by now: a VACUUM that fails (another writer held the database
  // past the busy timeout) is reported, not thrown.
  // A server's VACUUM reclaims the deleted rows' space for new rows (its autovacuum would too).
  if (!result.removed.empty() || (file && pragma_value(store, "PRAGMA freelist_count") > 0)) {
    try {
      exec(store, "VACUUM");
      if (file) exec(store, "PRAGMA wal_checkpoint(TRUNCATE)");
    } catch (const std::runtime_error& e) {
      result.vacuum_error = e.what();
    }
  }
  result.bytes_after = database_bytes(store);
  return result;
}

}  // namespace kvbench
