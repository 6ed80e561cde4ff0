#include "store_schema.h"

#include <sqlite3.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <regex>
#include <stdexcept>
#include <string_view>

#include "results_store.h"

namespace kvbench {

namespace {

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

// Version 8: a figure can carry the `sim` clock (the engine's work counted under callgrind).
// SQLite cannot alter a CHECK constraint: the metrics table is rebuilt, its rows kept.
constexpr const char* kSchemaV8 = R"sql(
DROP VIEW metric_values;
CREATE TABLE metrics_v8 (
  case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
  repetition INTEGER NOT NULL CHECK (repetition >= 1),
  name TEXT NOT NULL,
  value REAL,
  na_reason TEXT NOT NULL DEFAULT '',
  unit TEXT NOT NULL,
  clock TEXT NOT NULL CHECK (clock IN ('host', 'model', 'exact', 'cpu', 'sim')),
  extrapolated INTEGER NOT NULL,
  noisy INTEGER NOT NULL,
  CHECK (value IS NOT NULL OR na_reason != ''),
  PRIMARY KEY (case_id, repetition, name, clock)
);
INSERT INTO metrics_v8 (case_id, repetition, name, value, na_reason, unit, clock, extrapolated, noisy)
  SELECT case_id, repetition, name, value, na_reason, unit, clock, extrapolated, noisy FROM metrics;
DROP TABLE metrics;
ALTER TABLE metrics_v8 RENAME TO metrics;
CREATE VIEW metric_values AS
  SELECT r.id AS run_id, r.status AS run_status, c.name AS case_name, c.model, c.workload, c.policy, c.soc,
         m.repetition, m.name, m.value, m.na_reason, m.unit, m.clock, m.extrapolated, m.noisy
  FROM metrics m JOIN cases c ON c.id = m.case_id JOIN runs r ON r.id = c.run_id;
)sql";

// The same step on a server, which alters the constraint in place (its metrics table has no
// foreign key and a rowid of its own: postgres_schema()).
constexpr const char* kServerSchemaV8 = R"sql(
ALTER TABLE metrics DROP CONSTRAINT metrics_clock_check;
ALTER TABLE metrics ADD CONSTRAINT metrics_clock_check CHECK (clock IN ('host', 'model', 'exact', 'cpu', 'sim'));
)sql";

}  // namespace

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

std::string join_tags(const std::vector<std::string>& tags) {
  std::string out;
  for (const std::string& tag : tags) {
    if (!out.empty()) out.push_back(',');
    out.append(tag);
  }
  return out;
}

std::vector<std::string> split_tags(const std::string& tags) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at < tags.size();) {
    std::size_t next = tags.find(',', at);
    if (next == std::string::npos) next = tags.size();
    if (next > at) out.push_back(tags.substr(at, next - at));
    at = next + 1;
  }
  return out;
}

const std::string& schema_step(int version) {
  static const std::string kSchemaV7 =
      std::string(kSchemaV7Head) + "UPDATE events SET data = " + event_data_from_text("kind", "detail") + ";\n";
  static const std::string kSteps[] = {kSchemaV1, kSchemaV2, kSchemaV3, kSchemaV4, kSchemaV5, kSchemaV6, kSchemaV7, kSchemaV8};
  static_assert(std::size(kSteps) == kSchemaVersion);
  if (version < 1 || version > kSchemaVersion) throw std::invalid_argument("schema_step: no schema version " + std::to_string(version));
  return kSteps[version - 1];
}

}  // namespace kvbench

namespace kvbench {

namespace {

constexpr int kFirstServerVersion = 7;

constexpr std::string_view kCaseFigures[] = {"metrics", "series", "histograms", "events"};

// One SQLite statement of the schema in PostgreSQL's types.
std::string postgres_types(std::string sql) {
  static const std::pair<std::regex, const char*> kTypes[] = {
      {std::regex(R"(\bINTEGER PRIMARY KEY\b)"), "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"},
      {std::regex(R"(\bINTEGER\b)"), "BIGINT"},
      {std::regex(R"(\bREAL\b)"), "DOUBLE PRECISION"},
      // SQLite compares text byte by byte; a server's default collation follows its locale, and
      // every ORDER BY of names would then read in another order than from a file.
      {std::regex(R"(\bTEXT\b)"), "TEXT COLLATE \"C\""},
  };
  for (const auto& [type, replacement] : kTypes) sql = std::regex_replace(sql, type, replacement);
  return sql;
}

}  // namespace

const std::string& postgres_schema() {
  static const std::string schema = [] {
    sqlite3* db = nullptr;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK) throw std::runtime_error("postgres_schema: cannot open an in-memory database");
    const auto close = std::unique_ptr<sqlite3, int (*)(sqlite3*)>(db, sqlite3_close);
    for (int v = 1; v <= kSchemaVersion; ++v) {
      if (sqlite3_exec(db, schema_step(v).c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
        throw std::runtime_error("postgres_schema: step " + std::to_string(v) + ": " + sqlite3_errmsg(db));
      }
    }
    struct Object {
      std::string type, name, sql;
    };
    std::vector<Object> objects;
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db, "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid", -1, &stmt, nullptr);
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      objects.push_back({reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), reinterpret_cast<const char*>(sqlite3_column_text(stmt, 1)),
                         reinterpret_cast<const char*>(sqlite3_column_text(stmt, 2))});
    }
    sqlite3_finalize(stmt);
    // Tables first, each after the tables it refers to; then indexes and views.
    std::vector<std::string> created;
    std::string out;
    const auto refers_to_pending = [&](const Object& table) {
      for (const Object& other : objects) {
        if (other.type != "table" || other.name == table.name) continue;
        if (std::find(created.begin(), created.end(), other.name) != created.end()) continue;
        if (table.sql.find("REFERENCES " + other.name + "(") != std::string::npos) return true;
      }
      return false;
    };
    for (std::size_t pass = 0; pass < objects.size(); ++pass) {
      for (const Object& o : objects) {
        if (o.type != "table" || std::find(created.begin(), created.end(), o.name) != created.end() || refers_to_pending(o)) continue;
        std::string sql = postgres_types(o.sql);
        // A server checks a foreign key by a lookup per inserted row, which for a repetition's
        // thousand figures costs more than writing them: the figures of a case (its metrics,
        // series, histograms and events) name their case without one. Their case always exists
        // (written before them in the same process), and prune deletes them before their case.
        if (std::find(std::begin(kCaseFigures), std::end(kCaseFigures), o.name) != std::end(kCaseFigures)) {
          const std::string reference = " REFERENCES cases(id) ON DELETE CASCADE";
          const std::size_t at = sql.find(reference);
          if (at == std::string::npos) throw std::logic_error("postgres_schema: " + o.name + " does not refer to cases");
          sql.erase(at, reference.size());
        }
        if (sql.find(" PRIMARY KEY (") != std::string::npos || sql.find("IDENTITY PRIMARY KEY") == std::string::npos) {
          const std::size_t open = sql.find('(');
          sql.insert(open + 1, "\n  rowid BIGINT GENERATED ALWAYS AS IDENTITY,");
        }
        out += sql + ";\n";
        created.push_back(o.name);
      }
    }
    for (const char* type : {"index", "view"}) {
      for (const Object& o : objects) {
        if (o.type == type) out += postgres_types(o.sql) + ";\n";
      }
    }
    return out;
  }();
  return schema;
}

std::string postgres_step(int version) {
  // A server starts at the version kvbench first wrote to servers; the steps after it are the
  // SQLite steps in PostgreSQL's types (a step that rebuilds a table, as SQLite must to change a
  // constraint, needs a server text of its own here instead).
  if (version <= kFirstServerVersion) throw std::logic_error("postgres_step: a server starts at version " + std::to_string(kFirstServerVersion));
  if (version == 8) return kServerSchemaV8;
  return postgres_types(schema_step(version));
}

}  // namespace kvbench
