#include "results_store.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <iterator>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "runtime/error.h"
#include "sql_query.h"

namespace kvbench {

namespace {

// A prepared statement with bound parameters; finalized when it goes.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) fail("prepare");
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, std::int64_t v) { return check(sqlite3_bind_int64(stmt_, i, v)); }
  Statement& bind(int i, int v) { return check(sqlite3_bind_int(stmt_, i, v)); }
  Statement& bind(int i, double v) { return check(sqlite3_bind_double(stmt_, i, v)); }
  Statement& bind(int i, const std::string& v) {
    return check(sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  Statement& bind_null(int i) { return check(sqlite3_bind_null(stmt_, i)); }
  // true: a row is ready; false: done.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) fail("step");
    return false;
  }
  void run() {
    while (step()) {
    }
    sqlite3_reset(stmt_);
  }
  std::int64_t int64(int column) const { return sqlite3_column_int64(stmt_, column); }
  std::string text(int column) const {
    const auto* s = sqlite3_column_text(stmt_, column);
    return s == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(s));
  }

 private:
  Statement& check(int rc) {
    if (rc != SQLITE_OK) fail("bind");
    return *this;
  }
  [[noreturn]] void fail(const char* what) const { throw_sqlite_failure(db_, what); }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};



std::string join_tags(const std::vector<std::string>& tags) {
  std::string out;
  for (const std::string& tag : tags) {
    if (!out.empty()) out.push_back(',');
    out.append(tag);
  }
  return out;
}

// Schema version 1. Later versions append migrations; a version is never edited once shipped.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  started_at TEXT NOT NULL,
  ended_at TEXT,
  status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed', 'aborted')),
  pid INTEGER NOT NULL,
  boot_id TEXT NOT NULL,
  heartbeat_at TEXT NOT NULL,
  git_sha TEXT NOT NULL,
  git_dirty INTEGER NOT NULL,
  config_json TEXT NOT NULL,
  config_hash TEXT NOT NULL,
  tags TEXT NOT NULL,
  meta_json TEXT NOT NULL
);
CREATE TABLE cases (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  model TEXT NOT NULL,
  workload TEXT NOT NULL,
  policy TEXT NOT NULL,
  soc TEXT NOT NULL,
  skipped_reason TEXT NOT NULL DEFAULT ''
);
CREATE TABLE metrics (
  case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
  repetition INTEGER NOT NULL CHECK (repetition >= 1),
  name TEXT NOT NULL,
  value REAL,
  na_reason TEXT NOT NULL DEFAULT '',
  unit TEXT NOT NULL,
  clock TEXT NOT NULL CHECK (clock IN ('host', 'model', 'exact')),
  extrapolated INTEGER NOT NULL,
  noisy INTEGER NOT NULL,
  CHECK (value IS NOT NULL OR na_reason != ''),
  PRIMARY KEY (case_id, repetition, name)
);
CREATE TABLE series (
  case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
  repetition INTEGER NOT NULL,
  name TEXT NOT NULL,
  step INTEGER NOT NULL,
  value REAL,
  PRIMARY KEY (case_id, repetition, name, step)
);
CREATE TABLE events (
  case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
  repetition INTEGER NOT NULL,
  step INTEGER NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT NOT NULL
);
CREATE INDEX cases_by_run ON cases(run_id);
CREATE INDEX events_by_case ON events(case_id, repetition);
CREATE VIEW metric_values AS
  SELECT r.id AS run_id, r.status AS run_status, c.name AS case_name, c.model, c.workload, c.policy, c.soc,
         m.repetition, m.name, m.value, m.na_reason, m.unit, m.clock, m.extrapolated, m.noisy
  FROM metrics m JOIN cases c ON c.id = m.case_id JOIN runs r ON r.id = c.run_id;
)sql";

// Version 2: a case's outcome (skipped cases keep their reason; a failed case keeps its error),
// and histograms.
constexpr const char* kSchemaV2 = R"sql(
ALTER TABLE cases ADD COLUMN status TEXT NOT NULL DEFAULT 'complete'
  CHECK (status IN ('running', 'complete', 'skipped', 'failed'));
ALTER TABLE cases ADD COLUMN error TEXT NOT NULL DEFAULT '';
UPDATE cases SET status = 'skipped' WHERE skipped_reason != '';
CREATE TABLE histograms (
  case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
  repetition INTEGER NOT NULL,
  name TEXT NOT NULL,
  bin INTEGER NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (case_id, repetition, name, bin)
);
)sql";

// Version 3: runs can be `interrupted`. SQLite cannot alter a CHECK constraint, so the runs
// table is rebuilt (foreign keys are off during migration: dropping the old table must not
// cascade into cases) and the view over it recreated.
constexpr const char* kSchemaV3 = R"sql(
DROP VIEW metric_values;
CREATE TABLE runs_v3 (
  id INTEGER PRIMARY KEY,
  started_at TEXT NOT NULL,
  ended_at TEXT,
  status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed', 'aborted', 'interrupted')),
  pid INTEGER NOT NULL,
  boot_id TEXT NOT NULL,
  heartbeat_at TEXT NOT NULL,
  git_sha TEXT NOT NULL,
  git_dirty INTEGER NOT NULL,
  config_json TEXT NOT NULL,
  config_hash TEXT NOT NULL,
  tags TEXT NOT NULL,
  meta_json TEXT NOT NULL
);
INSERT INTO runs_v3 (id, started_at, ended_at, status, pid, boot_id, heartbeat_at, git_sha, git_dirty, config_json,
                     config_hash, tags, meta_json)
  SELECT id, started_at, ended_at, status, pid, boot_id, heartbeat_at, git_sha, git_dirty, config_json, config_hash,
         tags, meta_json FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v3 RENAME TO runs;
CREATE VIEW metric_values AS
  SELECT r.id AS run_id, r.status AS run_status, c.name AS case_name, c.model, c.workload, c.policy, c.soc,
         m.repetition, m.name, m.value, m.na_reason, m.unit, m.clock, m.extrapolated, m.noisy
  FROM metrics m JOIN cases c ON c.id = m.case_id JOIN runs r ON r.id = c.run_id;
)sql";

// Version 4: what compares runs - named baselines, acknowledgements of accepted changes,
// detected change points, and every gate's verdict (so a report can show it).
constexpr const char* kSchemaV4 = R"sql(
CREATE TABLE baselines (
  name TEXT PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  set_at TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT ''
);
CREATE TABLE acks (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  baseline_run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  case_glob TEXT NOT NULL,
  metric_glob TEXT NOT NULL,
  reason TEXT NOT NULL,
  created_at TEXT NOT NULL,
  expires_at TEXT
);
CREATE TABLE change_points (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  case_name TEXT NOT NULL,
  metric TEXT NOT NULL,
  before_value REAL,
  after_value REAL,
  detected_at TEXT NOT NULL,
  detail TEXT NOT NULL DEFAULT ''
);
CREATE TABLE verdicts (
  id INTEGER PRIMARY KEY,
  created_at TEXT NOT NULL,
  baseline_run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  candidate_run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  outcome TEXT NOT NULL CHECK (outcome IN ('pass', 'fail', 'inconclusive')),
  regressed INTEGER NOT NULL,
  improved INTEGER NOT NULL,
  inconclusive INTEGER NOT NULL,
  rules_json TEXT NOT NULL,
  rows_json TEXT NOT NULL
);
CREATE INDEX change_points_by_case ON change_points(case_name, metric);
)sql";

// Version 5: a figure is keyed by its clock too, so one case holds the measured (host) and the
// modelled (model) tpot_ms_p50 side by side. SQLite cannot change a primary key: the metrics
// table is rebuilt and the view over it recreated.
constexpr const char* kSchemaV5 = R"sql(
DROP VIEW metric_values;
CREATE TABLE metrics_v5 (
  case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
  repetition INTEGER NOT NULL CHECK (repetition >= 1),
  name TEXT NOT NULL,
  value REAL,
  na_reason TEXT NOT NULL DEFAULT '',
  unit TEXT NOT NULL,
  clock TEXT NOT NULL CHECK (clock IN ('host', 'model', 'exact')),
  extrapolated INTEGER NOT NULL,
  noisy INTEGER NOT NULL,
  CHECK (value IS NOT NULL OR na_reason != ''),
  PRIMARY KEY (case_id, repetition, name, clock)
);
INSERT INTO metrics_v5 (case_id, repetition, name, value, na_reason, unit, clock, extrapolated, noisy)
  SELECT case_id, repetition, name, value, na_reason, unit, clock, extrapolated, noisy FROM metrics;
DROP TABLE metrics;
ALTER TABLE metrics_v5 RENAME TO metrics;
CREATE VIEW metric_values AS
  SELECT r.id AS run_id, r.status AS run_status, c.name AS case_name, c.model, c.workload, c.policy, c.soc,
         m.repetition, m.name, m.value, m.na_reason, m.unit, m.clock, m.extrapolated, m.noisy
  FROM metrics m JOIN cases c ON c.id = m.case_id JOIN runs r ON r.id = c.run_id;
)sql";

// Version 6: a gate's outcome can also be `unreliable` (the noise left a comparison undecided)
// or `definition-changed` (the runs' benchmark definitions differ: a new baseline is needed),
// and a figure can carry the `cpu` clock (the engine threads' CPU time and instructions).
// SQLite cannot alter a CHECK constraint: the verdicts table is rebuilt, its rows and ids kept.
constexpr const char* kSchemaV6 = R"sql(
CREATE TABLE verdicts_v6 (
  id INTEGER PRIMARY KEY,
  created_at TEXT NOT NULL,
  baseline_run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  candidate_run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  outcome TEXT NOT NULL CHECK (outcome IN ('pass', 'fail', 'inconclusive', 'unreliable', 'definition-changed')),
  regressed INTEGER NOT NULL,
  improved INTEGER NOT NULL,
  inconclusive INTEGER NOT NULL,
  rules_json TEXT NOT NULL,
  rows_json TEXT NOT NULL
);
INSERT INTO verdicts_v6 (id, created_at, baseline_run, candidate_run, outcome, regressed, improved, inconclusive, rules_json, rows_json)
  SELECT id, created_at, baseline_run, candidate_run, outcome, regressed, improved, inconclusive, rules_json, rows_json FROM verdicts;
DROP TABLE verdicts;
ALTER TABLE verdicts_v6 RENAME TO verdicts;
DROP VIEW metric_values;
CREATE TABLE metrics_v6 (
  case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
  repetition INTEGER NOT NULL CHECK (repetition >= 1),
  name TEXT NOT NULL,
  value REAL,
  na_reason TEXT NOT NULL DEFAULT '',
  unit TEXT NOT NULL,
  clock TEXT NOT NULL CHECK (clock IN ('host', 'model', 'exact', 'cpu')),
  extrapolated INTEGER NOT NULL,
  noisy INTEGER NOT NULL,
  CHECK (value IS NOT NULL OR na_reason != ''),
  PRIMARY KEY (case_id, repetition, name, clock)
);
INSERT INTO metrics_v6 (case_id, repetition, name, value, na_reason, unit, clock, extrapolated, noisy)
  SELECT case_id, repetition, name, value, na_reason, unit, clock, extrapolated, noisy FROM metrics;
DROP TABLE metrics;
ALTER TABLE metrics_v6 RENAME TO metrics;
CREATE VIEW metric_values AS
  SELECT r.id AS run_id, r.status AS run_status, c.name AS case_name, c.model, c.workload, c.policy, c.soc,
         m.repetition, m.name, m.value, m.na_reason, m.unit, m.clock, m.extrapolated, m.noisy
  FROM metrics m JOIN cases c ON c.id = m.case_id JOIN runs r ON r.id = c.run_id;
)sql";

// Version 7: events keep their fields (metrics/run_event.h) as JSON in `data`; `detail` stays a
// line for people. The events of older versions are converted once from their text by
// event_data_from_text(), which read-only opens of an older database apply as they read.
constexpr const char* kSchemaV7Head = "ALTER TABLE events ADD COLUMN data TEXT;\n";

// The fields of an events row from its kind and the text older versions stored (the one place
// that reads that text: written by kvbench up to schema 6, in the formats of its recorder). Text
// in another shape (the budget=F lines of early schema-2 recorders) is kept as {"text": ...},
// which readers take as an event of a kind they do not know. The v7 migration applies this
// expression: once a database has been migrated, editing it changes nothing for that database.
std::string event_data_from_text(const std::string& kind, const std::string& detail) {
  std::string sql =
      "CASE\n"
      "  WHEN {K} IN ('pressure', 'l2_failed', 'l2_full', 'budget_tightened', 'requantized', 'l1_overflow')\n"
      "       AND instr({D}, '->') > 0 AND instr({D}, ' l1_used=') > 0 AND instr({D}, '/') > 0 THEN json_object(\n"
      "    'from', substr({D}, 1, instr({D}, '->') - 1),\n"
      "    'to', substr({D}, instr({D}, '->') + 2, instr({D}, ' l1_used=') - instr({D}, '->') - 2),\n"
      "    'l1_used_bytes', CAST(substr({D}, instr({D}, ' l1_used=') + 9, instr({D}, '/') - instr({D}, ' l1_used=') - 9) AS INTEGER),\n"
      "    'l1_capacity_bytes', CAST(substr({D}, instr({D}, '/') + 1) AS INTEGER),\n"
      "    'reason', CASE WHEN instr(substr({D}, instr({D}, '/') + 1), ' ') > 0 THEN substr(substr({D}, instr({D}, '/') + 1), instr(substr({D}, instr({D}, '/') + 1), ' ') + 1) ELSE '' END)\n"
      "  WHEN {K} = 'budget_change' AND {D} LIKE 'budget % -> %' THEN json_object(\n"
      "    'from', json(CASE WHEN substr({D}, 8, instr({D}, ' -> ') - 8) LIKE '% pages' THEN json_object('pages', CAST(substr({D}, 8, instr({D}, ' -> ') - 8) AS INTEGER)) ELSE json_object('fraction', CAST(rtrim(substr({D}, 8, instr({D}, ' -> ') - 8), '%') AS REAL) / 100.0) END),\n"
      "    'to', json(CASE WHEN substr({D}, instr({D}, ' -> ') + 4) LIKE '% pages' THEN json_object('pages', CAST(substr({D}, instr({D}, ' -> ') + 4) AS INTEGER)) ELSE json_object('fraction', CAST(rtrim(substr({D}, instr({D}, ' -> ') + 4), '%') AS REAL) / 100.0) END))\n"
      "  WHEN {K} = 'token_dropped' THEN json_object(\n"
      "    'layer', CAST(substr({D}, instr({D}, 'layer=') + 6) AS INTEGER),\n"
      "    'q_head', CAST(substr({D}, instr({D}, 'q_head=') + 7) AS INTEGER),\n"
      "    'position', CAST(substr({D}, instr({D}, 'position=') + 9) AS INTEGER),\n"
      "    'weight', CAST(substr({D}, instr({D}, 'weight=') + 7) AS REAL))\n"
      "  WHEN {K} = 'kernel' THEN json_object(\n"
      "    'kernel', CASE WHEN {D} LIKE 'kernel_prefill_%' THEN 'prefill' ELSE 'decode' END,\n"
      "    'isa', CASE WHEN {D} LIKE 'kernel_prefill_%' THEN substr({D}, 16) ELSE substr({D}, 15) END)\n"
      "  WHEN {K} = 'events_truncated' THEN json_object('count', CAST({D} AS INTEGER))\n"
      "  ELSE json_object('text', {D})\n"
      "END\n";
  const auto replace_all = [&sql](const std::string& from, const std::string& to) {
    for (std::size_t at = sql.find(from); at != std::string::npos; at = sql.find(from, at + to.size())) sql.replace(at, from.size(), to);
  };
  replace_all("{K}", kind);
  replace_all("{D}", detail);
  return sql;
}

int read_user_version(sqlite3* db) {
  Statement user_version(db, "PRAGMA user_version");
  return user_version.step() ? static_cast<int>(user_version.int64(0)) : 0;
}

std::int64_t table_count(sqlite3* db) {
  Statement tables(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'");
  return tables.step() ? tables.int64(0) : 0;
}

}  // namespace

std::optional<RunStatus> parse_run_status(const std::string& name) {
  for (RunStatus s : {RunStatus::Running, RunStatus::Complete, RunStatus::Failed, RunStatus::Aborted, RunStatus::Interrupted}) {
    if (name == run_status_name(s)) return s;
  }
  return std::nullopt;
}

bool run_process_gone(std::int64_t pid, const std::string& run_boot_id) {
  if (run_boot_id != boot_id()) return true;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

std::string reported_run_status(const std::string& stored, std::int64_t pid, const std::string& run_boot_id) {
  if (stored == "running" && run_process_gone(pid, run_boot_id)) return "aborted";
  return stored;
}

const char* run_status_name(RunStatus status) {
  switch (status) {
    case RunStatus::Running: return "running";
    case RunStatus::Complete: return "complete";
    case RunStatus::Failed: return "failed";
    case RunStatus::Aborted: return "aborted";
    case RunStatus::Interrupted: return "interrupted";
  }
  return "unknown";
}

const char* case_status_name(CaseStatus status) {
  switch (status) {
    case CaseStatus::Running: return "running";
    case CaseStatus::Complete: return "complete";
    case CaseStatus::Skipped: return "skipped";
    case CaseStatus::Failed: return "failed";
  }
  return "unknown";
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

ResultsStore::ResultsStore(const std::string& path, Access access) : path_(path), access_(access) {
  if (access == Access::ReadOnly) {
    open_read_only();
    return;
  }
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr) !=
      SQLITE_OK) {
    const std::string reason = db_ != nullptr ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw kv::InputError(path, "database", "cannot open: " + reason);
  }
  sqlite3_busy_timeout(db_, 30000);
  try {
    // Two processes creating one database at once: switching a new file to WAL and creating
    // the schema can meet SQLITE_BUSY without the busy handler (SQLite's deadlock avoidance),
    // so the setup is retried for as long as the busy timeout.
    for (int attempt = 0;; ++attempt) {
      try {
        exec("PRAGMA journal_mode = WAL");
        migrate();
        break;
      } catch (const kv::InputError&) {
        throw;
      } catch (const std::runtime_error&) {
        const int code = sqlite3_errcode(db_) & 0xff;
        if ((code != SQLITE_BUSY && code != SQLITE_LOCKED) || attempt >= 300) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    // After the migration: a table rebuild must not cascade.
    exec("PRAGMA foreign_keys = ON");
  } catch (const std::runtime_error& e) {
    const int code = sqlite3_errcode(db_) & 0xff;
    sqlite3_close(db_);
    db_ = nullptr;
    if (const auto* input = dynamic_cast<const kv::InputError*>(&e)) throw *input;
    if (code == SQLITE_READONLY) {
      throw kv::InputError(path, "--db", std::string("cannot write: ") + e.what() +
                                             " (`list`, `show` and `export` read a read-only database)");
    }
    throw kv::InputError(path, "database", e.what());
  }
  try {
    mark_abandoned_runs();
  } catch (...) {
    // A constructor that throws runs no destructor: the connection is closed here.
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

void ResultsStore::open_read_only() {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) throw kv::InputError(path_, "--db", "no such database (run `kvbench run` first)");
  if (!std::filesystem::is_regular_file(path_, ec)) throw kv::InputError(path_, "--db", "not a file");
  // A WAL database needs its -shm index; where it cannot be created (a read-only directory or
  // file) the database is opened immutable: nothing can be writing it then either.
  for (const bool immutable : {false, true}) {
    const std::string uri = "file:" + path_ + (immutable ? "?immutable=1" : "");
    sqlite3_close(db_);
    db_ = nullptr;
    if (sqlite3_open_v2(uri.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
      const std::string reason = db_ != nullptr ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      db_ = nullptr;
      throw kv::InputError(path_, "--db", "cannot open: " + reason);
    }
    sqlite3_busy_timeout(db_, 30000);
    try {
      schema_version_ = read_user_version(db_);
      const std::int64_t tables = table_count(db_);
      if (schema_version_ > kSchemaVersion) {
        throw kv::InputError(path_, "schema_version",
                             "the database has schema version " + std::to_string(schema_version_) +
                                 "; this kvbench reads up to " + std::to_string(kSchemaVersion) + " (use a newer kvbench)");
      }
      if (schema_version_ == 0) {
        throw kv::InputError(path_, "schema_version",
                             tables > 0 ? "not a kvbench database (tables without a kvbench schema version)"
                                        : "not a kvbench database (no kvbench schema; `kvbench run --db` creates one)");
      }
      if (schema_version_ < kOldestReadableSchema) {
        throw kv::InputError(path_, "schema_version",
                             "schema version " + std::to_string(schema_version_) +
                                 " is older than the readers take; any `kvbench run --db` on it migrates it");
      }
      return;
    } catch (const DatabaseError& e) {
      // No -shm index where it cannot be created: the immutable open next.
      const int code = sqlite3_errcode(db_) & 0xff;
      if (!immutable && (code == SQLITE_READONLY || code == SQLITE_CANTOPEN)) continue;
      sqlite3_close(db_);
      db_ = nullptr;
      throw;
    } catch (const kv::InputError&) {
      sqlite3_close(db_);
      db_ = nullptr;
      throw;
    } catch (const std::runtime_error& e) {
      const int code = sqlite3_errcode(db_) & 0xff;
      if (!immutable && (code == SQLITE_READONLY || code == SQLITE_CANTOPEN)) continue;
      const std::string reason = e.what();
      sqlite3_close(db_);
      db_ = nullptr;
      throw kv::InputError(path_, "--db", "cannot read: " + reason);
    }
  }
}

ResultsStore::~ResultsStore() { sqlite3_close(db_); }

void throw_sqlite_failure(sqlite3* db, const std::string& what, const std::string& message) {
  const std::string reason = !message.empty() ? message : sqlite3_errmsg(db);
  const char* file = sqlite3_db_filename(db, "main");
  const std::string path = file != nullptr && *file != '\0' ? file : "the results database";
  switch (sqlite3_extended_errcode(db) & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      throw DatabaseError(path, "--db", "damaged: " + reason + " (restore it from a copy, or start a new database)");
    case SQLITE_FULL:
      throw DatabaseError(path, "--db", "cannot write: " + reason + " (free space on its filesystem)");
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
      throw DatabaseError(path, "--db", "cannot read or write: " + reason);
    case SQLITE_READONLY:
    case SQLITE_PERM:
      throw DatabaseError(path, "--db", "cannot write: " + reason);
    default:
      throw std::runtime_error("sqlite " + what + ": " + reason);
  }
}

void ResultsStore::exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string message = error != nullptr ? error : sqlite3_errmsg(db_);
    sqlite3_free(error);
    throw_sqlite_failure(db_, sql, message);
  }
}

void ResultsStore::migrate() { migrate_to(kSchemaVersion); }

void ResultsStore::migrate_to(int target) {
  WriteTransaction tx(*this);
  int version = read_user_version(db_);
  const int found = version;
  if (version > kSchemaVersion) {
    throw kv::InputError(path_, "schema_version",
                         "the database has schema version " + std::to_string(version) + "; this kvbench reads up to " +
                             std::to_string(kSchemaVersion) + " (use a newer kvbench)");
  }
  if (version == 0) {
    if (table_count(db_) > 0) {
      throw kv::InputError(path_, "schema_version", "not a kvbench database (tables without a kvbench schema version)");
    }
    exec(kSchemaV1);
    version = 1;
  }
  // Each version's migration, in order; a shipped one is never edited.
  static const std::string kSchemaV7 =
      std::string(kSchemaV7Head) + "UPDATE events SET data = " + event_data_from_text("kind", "detail") + ";\n";
  static const char* const kMigrations[] = {nullptr, kSchemaV2, kSchemaV3, kSchemaV4, kSchemaV5, kSchemaV6, kSchemaV7.c_str()};
  static_assert(std::size(kMigrations) == kSchemaVersion);
  for (; version < target; ++version) exec(kMigrations[version]);
  // A database already at the version is not written: opening it changes none of its bytes.
  if (version != found) exec(("PRAGMA user_version = " + std::to_string(version)).c_str());
  tx.commit();
  schema_version_ = version;
}

void ResultsStore::create_at_version(const std::string& path, int version) {
  if (version < 1 || version > kSchemaVersion) throw std::invalid_argument("create_at_version: no schema version " + std::to_string(version));
  ResultsStore store(path, Access::ReadWrite, version);
}

ResultsStore::ResultsStore(const std::string& path, Access, int version) : path_(path) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw std::runtime_error("create_at_version: cannot create " + path);
  }
  exec("PRAGMA journal_mode = WAL");
  migrate_to(version);
}

std::int64_t ResultsStore::begin_run(const RunInfo& info) {
  WriteTransaction tx(*this);
  const std::string now = now_utc();
  Statement insert(db_,
                   "INSERT INTO runs (started_at, status, pid, boot_id, heartbeat_at, git_sha, git_dirty, config_json,"
                   " config_hash, tags, meta_json) VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  insert.bind(1, now).bind(2, static_cast<std::int64_t>(::getpid())).bind(3, boot_id()).bind(4, now);
  insert.bind(5, info.git_sha).bind(6, info.git_dirty ? 1 : 0).bind(7, info.config_json).bind(8, info.config_hash);
  insert.bind(9, join_tags(info.tags)).bind(10, info.meta_json);
  insert.run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

void ResultsStore::heartbeat(std::int64_t run_id) {
  Statement update(db_, "UPDATE runs SET heartbeat_at = ? WHERE id = ?");
  update.bind(1, now_utc()).bind(2, run_id).run();
}

void ResultsStore::finish_run(std::int64_t run_id, RunStatus status) {
  Statement update(db_, "UPDATE runs SET status = ?, ended_at = ? WHERE id = ?");
  update.bind(1, std::string(run_status_name(status))).bind(2, now_utc()).bind(3, run_id).run();
}

std::int64_t ResultsStore::add_case(std::int64_t run_id, const CaseInfo& info) {
  WriteTransaction tx(*this);
  Statement insert(db_,
                   "INSERT INTO cases (run_id, name, model, workload, policy, soc, skipped_reason, status)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  insert.bind(1, run_id).bind(2, info.name()).bind(3, info.model).bind(4, info.workload).bind(5, info.policy);
  insert.bind(6, info.soc).bind(7, info.skipped_reason);
  insert.bind(8, std::string(info.skipped_reason.empty() ? "running" : "skipped")).run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

void ResultsStore::finish_case(std::int64_t case_id, CaseStatus status, const std::string& error) {
  Statement update(db_, "UPDATE cases SET status = ?, error = ? WHERE id = ?");
  update.bind(1, std::string(case_status_name(status))).bind(2, error).bind(3, case_id).run();
}

void ResultsStore::add_repetition(std::int64_t case_id, const RepetitionRecord& record) {
  WriteTransaction tx(*this);
  insert_metrics(case_id, record.metrics);
  for (const auto& [name, values] : record.series) insert_series(case_id, record.repetition, name, values);
  for (const auto& [name, counts] : record.histograms) insert_histogram(case_id, record.repetition, name, counts);
  insert_events(case_id, record.repetition, record.events);
  tx.commit();
}

void ResultsStore::add_histogram(std::int64_t case_id, int repetition, const std::string& name,
                                 const std::vector<std::int64_t>& counts) {
  WriteTransaction tx(*this);
  insert_histogram(case_id, repetition, name, counts);
  tx.commit();
}

void ResultsStore::insert_histogram(std::int64_t case_id, int repetition, const std::string& name,
                                    const std::vector<std::int64_t>& counts) {
  Statement insert(db_, "INSERT INTO histograms (case_id, repetition, name, bin, count) VALUES (?, ?, ?, ?, ?)");
  for (std::size_t i = 0; i < counts.size(); ++i) {
    insert.bind(1, case_id).bind(2, repetition).bind(3, name).bind(4, static_cast<std::int64_t>(i)).bind(5, counts[i]).run();
  }
}

void ResultsStore::add_events(std::int64_t case_id, int repetition, const std::vector<RunEvent>& events) {
  WriteTransaction tx(*this);
  insert_events(case_id, repetition, events);
  tx.commit();
}

void ResultsStore::insert_events(std::int64_t case_id, int repetition, const std::vector<RunEvent>& events) {
  Statement insert(db_, "INSERT INTO events (case_id, repetition, step, kind, detail, data) VALUES (?, ?, ?, ?, ?, ?)");
  for (const RunEvent& e : events) {
    insert.bind(1, case_id).bind(2, repetition).bind(3, e.step).bind(4, std::string(e.name())).bind(5, describe(e)).bind(6, event_data(e)).run();
  }
}

std::string ResultsStore::event_data_sql(const std::string& alias) const {
  return schema_version_ >= 7 ? alias + ".data" : event_data_from_text(alias + ".kind", alias + ".detail");
}

void ResultsStore::add_metrics(std::int64_t case_id, const std::vector<MetricRecord>& metrics) {
  WriteTransaction tx(*this);
  insert_metrics(case_id, metrics);
  tx.commit();
}

void ResultsStore::insert_metrics(std::int64_t case_id, const std::vector<MetricRecord>& metrics) {
  Statement insert(db_,
                   "INSERT INTO metrics (case_id, repetition, name, value, na_reason, unit, clock, extrapolated, noisy)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (const MetricRecord& m : metrics) {
    if (m.repetition < 1) throw std::invalid_argument("metric " + m.name + ": repetitions count from 1");
    if (!m.value && m.na_reason.empty()) throw std::invalid_argument("metric " + m.name + ": a missing value needs na_reason");
    insert.bind(1, case_id).bind(2, m.repetition).bind(3, m.name);
    if (m.value) {
      insert.bind(4, *m.value);
    } else {
      insert.bind_null(4);
    }
    insert.bind(5, m.na_reason).bind(6, m.unit).bind(7, std::string(clock_name(m.clock)));
    insert.bind(8, m.extrapolated ? 1 : 0).bind(9, m.noisy ? 1 : 0).run();
  }
}

void ResultsStore::add_series(std::int64_t case_id, int repetition, const std::string& name, const std::vector<double>& values) {
  WriteTransaction tx(*this);
  insert_series(case_id, repetition, name, values);
  tx.commit();
}

void ResultsStore::insert_series(std::int64_t case_id, int repetition, const std::string& name, const std::vector<double>& values) {
  Statement insert(db_, "INSERT INTO series (case_id, repetition, name, step, value) VALUES (?, ?, ?, ?, ?)");
  for (std::size_t i = 0; i < values.size(); ++i) {
    insert.bind(1, case_id).bind(2, repetition).bind(3, name).bind(4, static_cast<std::int64_t>(i)).bind(5, values[i]).run();
  }
}

void ResultsStore::set_baseline(const std::string& name, std::int64_t run_id, const std::string& reason) {
  WriteTransaction tx(*this);
  Statement upsert(db_,
                   "INSERT INTO baselines (name, run_id, set_at, reason) VALUES (?, ?, ?, ?)"
                   " ON CONFLICT(name) DO UPDATE SET run_id = excluded.run_id, set_at = excluded.set_at, reason = excluded.reason");
  upsert.bind(1, name).bind(2, run_id).bind(3, now_utc()).bind(4, reason).run();
  tx.commit();
}

bool ResultsStore::remove_baseline(const std::string& name) {
  WriteTransaction tx(*this);
  Statement remove(db_, "DELETE FROM baselines WHERE name = ?");
  remove.bind(1, name).run();
  const bool removed = sqlite3_changes(db_) > 0;
  tx.commit();
  return removed;
}

std::int64_t ResultsStore::add_verdict(const VerdictRecord& v) {
  WriteTransaction tx(*this);
  Statement insert(db_,
                   "INSERT INTO verdicts (created_at, baseline_run, candidate_run, outcome, regressed, improved, inconclusive,"
                   " rules_json, rows_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  insert.bind(1, now_utc()).bind(2, v.baseline_run).bind(3, v.candidate_run).bind(4, v.outcome).bind(5, v.regressed);
  insert.bind(6, v.improved).bind(7, v.inconclusive).bind(8, v.rules_json).bind(9, v.rows_json).run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

std::int64_t ResultsStore::add_ack(std::int64_t run_id, std::int64_t baseline_run, const std::string& case_glob,
                                   const std::string& metric, const std::string& reason) {
  WriteTransaction tx(*this);
  Statement insert(db_,
                   "INSERT INTO acks (run_id, baseline_run, case_glob, metric_glob, reason, created_at) VALUES (?, ?, ?, ?, ?, ?)");
  insert.bind(1, run_id).bind(2, baseline_run).bind(3, case_glob).bind(4, metric).bind(5, reason).bind(6, now_utc()).run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

bool ResultsStore::remove_ack(std::int64_t id) {
  WriteTransaction tx(*this);
  Statement remove(db_, "DELETE FROM acks WHERE id = ?");
  remove.bind(1, id).run();
  const bool removed = sqlite3_changes(db_) > 0;
  tx.commit();
  return removed;
}

void ResultsStore::replace_change_points(const std::string& case_name, const std::string& metric,
                                         const std::vector<ChangePointRecord>& points) {
  WriteTransaction tx(*this);
  Statement remove(db_, "DELETE FROM change_points WHERE case_name = ? AND metric = ?");
  remove.bind(1, case_name).bind(2, metric).run();
  Statement insert(db_,
                   "INSERT INTO change_points (run_id, case_name, metric, before_value, after_value, detected_at, detail)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?)");
  for (const ChangePointRecord& p : points) {
    insert.bind(1, p.run_id).bind(2, case_name).bind(3, metric).bind(4, p.before).bind(5, p.after).bind(6, now_utc()).bind(7, p.detail).run();
  }
  tx.commit();
}

std::vector<RunRow> ResultsStore::runs() {
  std::vector<RunRow> rows;
  Statement select(db_, "SELECT id, status, started_at, coalesce(ended_at, ''), tags, pid, boot_id FROM runs ORDER BY id");
  while (select.step()) {
    RunRow row;
    row.id = select.int64(0);
    row.status = parse_run_status(reported_run_status(select.text(1), select.int64(5), select.text(6))).value_or(RunStatus::Aborted);
    row.started_at = select.text(2);
    row.ended_at = select.text(3);
    const std::string tags = select.text(4);
    for (std::size_t at = 0, next; at < tags.size(); at = next + 1) {
      next = tags.find(',', at);
      if (next == std::string::npos) next = tags.size();
      row.tags.push_back(tags.substr(at, next - at));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

int ResultsStore::mark_abandoned_runs() {
  WriteTransaction tx(*this);
  std::vector<std::int64_t> gone;
  {
    Statement select(db_, "SELECT id, pid, boot_id FROM runs WHERE status = 'running'");
    while (select.step()) {
      if (run_process_gone(select.int64(1), select.text(2))) gone.push_back(select.int64(0));
    }
  }
  Statement update(db_, "UPDATE runs SET status = 'aborted', ended_at = ? WHERE id = ? AND status = 'running'");
  for (std::int64_t id : gone) update.bind(1, now_utc()).bind(2, id).run();
  tx.commit();
  return static_cast<int>(gone.size());
}

}  // namespace kvbench
