#include "results_store.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "runtime/error.h"
#include "sql_query.h"
#include "store_location.h"
#include "store_schema.h"

namespace kvbench {

namespace {

// The schema version: SQLite keeps it in the file header (user_version), PostgreSQL in a table
// of its own (0 where there is none yet).
int read_schema_version(ResultsStore& store) {
  if (store.connection().dialect() == SqlDialect::Sqlite) {
    Query user_version(store, "PRAGMA user_version");
    return user_version.step() ? static_cast<int>(user_version.int64(0)) : 0;
  }
  if (!has_table(store, "kvbench_schema")) return 0;
  Query version(store, "SELECT max(version) FROM kvbench_schema");
  return version.step() && !version.null(0) ? static_cast<int>(version.int64(0)) : 0;
}

// What no kvbench of this version opens, reader or writer: a newer schema, or tables without a
// kvbench version (`tables` is only read at version 0).
void refuse_newer_or_foreign(const std::string& path, int version, std::int64_t tables) {
  if (version > kSchemaVersion) {
    throw kv::InputError(path, "schema_version",
                         "the database has schema version " + std::to_string(version) + "; this kvbench reads up to " +
                             std::to_string(kSchemaVersion) + " (use a newer kvbench)");
  }
  if (version == 0 && tables > 0) {
    throw kv::InputError(path, "schema_version", "not a kvbench database (tables without a kvbench schema version)");
  }
}

// Readers also refuse a store with no schema (they never create one) and one older than they read.
void check_readable_version(const std::string& path, int version, std::int64_t tables) {
  refuse_newer_or_foreign(path, version, tables);
  if (version == 0) {
    throw kv::InputError(path, "schema_version", "not a kvbench database (no kvbench schema; `kvbench run --db` creates one)");
  }
  if (version < kOldestReadableSchema) {
    throw kv::InputError(path, "schema_version",
                         "schema version " + std::to_string(version) + " is older than the readers take; any `kvbench run --db` on it migrates it");
  }
}

constexpr const char* kSeriesInsert = "INSERT INTO series (case_id, repetition, name, step, value)";
constexpr const char* kHistogramInsert = "INSERT INTO histograms (case_id, repetition, name, bin, count)";

void add_series_rows(BatchInsert& insert, std::int64_t case_id, int repetition, const std::string& name, const std::vector<double>& values) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    insert.add({case_id, std::int64_t{repetition}, name, static_cast<std::int64_t>(i), stored_real(values[i])});
  }
}

void add_histogram_rows(BatchInsert& insert, std::int64_t case_id, int repetition, const std::string& name,
                        const std::vector<std::int64_t>& counts) {
  for (std::size_t i = 0; i < counts.size(); ++i) insert.add({case_id, std::int64_t{repetition}, name, static_cast<std::int64_t>(i), counts[i]});
}

}  // namespace

std::optional<RunStatus> parse_run_status(const std::string& name) {
  for (RunStatus s : {RunStatus::Running, RunStatus::Complete, RunStatus::Failed, RunStatus::Aborted, RunStatus::Interrupted}) {
    if (name == run_status_name(s)) return s;
  }
  return std::nullopt;
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

ResultsStore::ResultsStore(const std::string& path, Access access) : path_(path), access_(access) {
  if (is_postgres_uri(path)) {
    open_postgres();
    return;
  }
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
  conn_ = sqlite_connection(db_);
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
    close();
    if (const auto* input = dynamic_cast<const kv::InputError*>(&e)) throw *input;
    if (code == SQLITE_READONLY || code == SQLITE_CANTOPEN || code == SQLITE_PERM) {
      if (const std::string read_only = file_store_write_problem(path); !read_only.empty()) {
        throw kv::InputError(path, "--db", "cannot write: it " + read_only + " (" + e.what() + ")");
      }
    }
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
    close();
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
    close();
    if (sqlite3_open_v2(uri.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
      const std::string reason = db_ != nullptr ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      db_ = nullptr;
      throw kv::InputError(path_, "--db", "cannot open: " + reason);
    }
    conn_ = sqlite_connection(db_);
    sqlite3_busy_timeout(db_, 30000);
    try {
      schema_version_ = read_schema_version(*this);
      check_readable_version(path_, schema_version_, table_count(*this));
      return;
    } catch (const DatabaseError& e) {
      // No -shm index where it cannot be created: the immutable open next.
      const int code = sqlite3_errcode(db_) & 0xff;
      if (!immutable && (code == SQLITE_READONLY || code == SQLITE_CANTOPEN)) continue;
      close();
      throw;
    } catch (const kv::InputError&) {
      close();
      throw;
    } catch (const std::runtime_error& e) {
      const int code = sqlite3_errcode(db_) & 0xff;
      if (!immutable && (code == SQLITE_READONLY || code == SQLITE_CANTOPEN)) continue;
      const std::string reason = e.what();
      close();
      throw kv::InputError(path_, "--db", "cannot read: " + reason);
    }
  }
}

std::string file_store_write_problem(const std::string& db) {
  if (is_postgres_uri(db)) return "";
  namespace fs = std::filesystem;
  const fs::path file(db);
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  const std::string fix = "; `list`, `show` and `export` read it as it is: to write, give a writable copy or make it writable";
  std::error_code ec;
  if (fs::exists(file, ec) && ::access(file.c_str(), W_OK) != 0) {
    return "is read-only for this user (" + std::string(std::strerror(errno)) + ")" + fix;
  }
  // SQLite writes its journal beside the file.
  if (fs::is_directory(dir, ec) && ::access(dir.c_str(), W_OK | X_OK) != 0) {
    return "its directory " + dir.string() + " is read-only for this user (" + std::strerror(errno) + "), and SQLite writes its journal there" + fix;
  }
  return "";
}

bool store_exists(const std::string& db) {
  if (!is_postgres_uri(db)) {
    std::error_code ec;
    return std::filesystem::exists(db, ec);
  }
  const std::unique_ptr<SqlConnection> connection = postgres_connection(db);
  const auto tables = connection->prepare(table_count_sql(SqlDialect::Postgres));
  return tables->step() && tables->int64(0) > 0;
}

void ResultsStore::open_postgres() {
  conn_ = postgres_connection(path_);
  if (access_ == Access::ReadOnly) {
    // A reader never writes, on a server as in a file: the session itself refuses to.
    exec("SET default_transaction_read_only = on");
    schema_version_ = read_schema_version(*this);
    check_readable_version(path_, schema_version_, table_count(*this));
    return;
  }
  migrate();
  mark_abandoned_runs();
}

void ResultsStore::close() {
  conn_.reset();
  db_ = nullptr;
}

ResultsStore::~ResultsStore() = default;

void throw_sqlite_failure(sqlite3* db, const std::string& what, const std::string& message) {
  const std::string reason = !message.empty() ? message : sqlite3_errmsg(db);
  const char* file = sqlite3_db_filename(db, "main");
  const std::string path = file != nullptr && *file != '\0' ? file : "the results database";
  const int code = sqlite3_extended_errcode(db) & 0xff;
  switch (code) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      throw DatabaseError(path, "--db", "damaged: " + reason + " (restore it from a copy, or start a new database)");
    case SQLITE_FULL:
      throw DatabaseError(path, "--db", "cannot write: " + reason + " (free space on its filesystem)");
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
      if (const std::string read_only = file_store_write_problem(path); !read_only.empty()) {
        throw DatabaseError(path, "--db", "cannot write: it " + read_only + " (" + reason + ")");
      }
      throw DatabaseError(path, "--db", std::string(code == SQLITE_READONLY || code == SQLITE_PERM ? "cannot write: " : "cannot read or write: ") + reason);
    default:
      throw std::runtime_error("sqlite " + what + ": " + reason);
  }
}

void ResultsStore::exec(const std::string& sql) { conn_->exec(sql); }

void ResultsStore::migrate() { migrate_to(kSchemaVersion); }

void ResultsStore::migrate_to(int target) {
  WriteTransaction tx(*this);
  const bool postgres = conn_->dialect() == SqlDialect::Postgres;
  // Writers of many machines may create a server's schema at once: one at a time, in the
  // transaction (SQLite's BEGIN IMMEDIATE already serialises them).
  if (postgres) exec("SELECT pg_advisory_xact_lock(46046046)");
  int version = read_schema_version(*this);
  const int found = version;
  refuse_newer_or_foreign(path_, version, version == 0 ? table_count(*this) : 0);
  if (postgres) {
    // A server's schema is created at the current version, rendered from the same migrations
    // (store_schema.h); a server at an older version takes each later step rendered alike.
    if (version == 0) {
      exec(postgres_schema());
      exec("CREATE TABLE kvbench_schema (version INTEGER NOT NULL)");
      exec("INSERT INTO kvbench_schema (version) VALUES (0)");
      version = kSchemaVersion;
    }
    for (; version < target; ++version) exec(postgres_step(version + 1));
    if (version != found) exec("UPDATE kvbench_schema SET version = " + std::to_string(version));
  } else {
    if (version == 0) {
      exec(schema_step(1));
      version = 1;
    }
    // Each version's migration, in order (store_schema.h).
    for (; version < target; ++version) exec(schema_step(version + 1));
    // A database already at the version is not written: opening it changes none of its bytes.
    if (version != found) exec("PRAGMA user_version = " + std::to_string(version));
  }
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
  conn_ = sqlite_connection(db_);
  exec("PRAGMA journal_mode = WAL");
  migrate_to(version);
}

std::int64_t ResultsStore::begin_run(const RunInfo& info) {
  WriteTransaction tx(*this);
  const std::string now = now_utc();
  Query insert(*this,
               "INSERT INTO runs (started_at, status, pid, boot_id, heartbeat_at, git_sha, git_dirty, config_json,"
               " config_hash, tags, meta_json) VALUES (?, 'running', ?, ?, " + now_sql(conn_->dialect()) + ", ?, ?, ?, ?, ?, ?) RETURNING id");
  insert.bind(1, now).bind(2, static_cast<std::int64_t>(::getpid())).bind(3, boot_id());
  insert.bind(4, info.git_sha).bind(5, info.git_dirty ? 1 : 0).bind(6, info.config_json).bind(7, info.config_hash);
  insert.bind(8, join_tags(info.tags)).bind(9, info.meta_json);
  const std::int64_t id = insert.insert_returning_id();
  tx.commit();
  return id;
}

void ResultsStore::heartbeat(std::int64_t run_id) {
  // The database's clock, not this machine's: liveness across machines compares beats with it.
  Query update(*this, "UPDATE runs SET heartbeat_at = " + now_sql(conn_->dialect()) + " WHERE id = ?");
  update.bind(1, run_id).run();
}

void ResultsStore::finish_run(std::int64_t run_id, RunStatus status) {
  Query update(*this, "UPDATE runs SET status = ?, ended_at = ? WHERE id = ?");
  update.bind(1, std::string(run_status_name(status))).bind(2, now_utc()).bind(3, run_id).run();
}

std::int64_t ResultsStore::add_case(std::int64_t run_id, const CaseInfo& info) {
  WriteTransaction tx(*this);
  Query insert(*this,
                   "INSERT INTO cases (run_id, name, model, workload, policy, soc, skipped_reason, status)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id");
  insert.bind(1, run_id).bind(2, info.name()).bind(3, info.model).bind(4, info.workload).bind(5, info.policy);
  insert.bind(6, info.soc).bind(7, info.skipped_reason);
  insert.bind(8, std::string(info.skipped_reason.empty() ? "running" : "skipped"));
  const std::int64_t id = insert.insert_returning_id();
  tx.commit();
  return id;
}

void ResultsStore::finish_case(std::int64_t case_id, CaseStatus status, const std::string& error) {
  Query update(*this, "UPDATE cases SET status = ?, error = ? WHERE id = ?");
  update.bind(1, std::string(case_status_name(status))).bind(2, error).bind(3, case_id).run();
}

void ResultsStore::add_repetition(std::int64_t case_id, const RepetitionRecord& record) {
  const auto start = std::chrono::steady_clock::now();
  WriteTransaction tx(*this);
  insert_metrics(case_id, record.metrics);
  // One batch per table for the whole repetition: on a server each statement is a round trip.
  {
    BatchInsert series(*this, kSeriesInsert, 5);
    for (const auto& [name, values] : record.series) add_series_rows(series, case_id, record.repetition, name, values);
    series.flush();
    BatchInsert histograms(*this, kHistogramInsert, 5);
    for (const auto& [name, counts] : record.histograms) add_histogram_rows(histograms, case_id, record.repetition, name, counts);
    histograms.flush();
  }
  insert_events(case_id, record.repetition, record.events);
  tx.commit();
  ++writes_.repetitions;
  writes_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void ResultsStore::add_histogram(std::int64_t case_id, int repetition, const std::string& name,
                                 const std::vector<std::int64_t>& counts) {
  WriteTransaction tx(*this);
  insert_histogram(case_id, repetition, name, counts);
  tx.commit();
}

void ResultsStore::insert_histogram(std::int64_t case_id, int repetition, const std::string& name,
                                    const std::vector<std::int64_t>& counts) {
  BatchInsert insert(*this, kHistogramInsert, 5);
  add_histogram_rows(insert, case_id, repetition, name, counts);
  insert.flush();
}

void ResultsStore::add_events(std::int64_t case_id, int repetition, const std::vector<RunEvent>& events) {
  WriteTransaction tx(*this);
  insert_events(case_id, repetition, events);
  tx.commit();
}

void ResultsStore::insert_events(std::int64_t case_id, int repetition, const std::vector<RunEvent>& events) {
  // Rows go in the events' order: readers order by insertion (rowid).
  BatchInsert insert(*this, "INSERT INTO events (case_id, repetition, step, kind, detail, data)", 6);
  for (const RunEvent& e : events) {
    insert.add({case_id, std::int64_t{repetition}, static_cast<std::int64_t>(e.step), std::string(e.name()), describe(e), event_data(e)});
  }
  insert.flush();
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
  BatchInsert insert(*this, "INSERT INTO metrics (case_id, repetition, name, value, na_reason, unit, clock, extrapolated, noisy)", 9);
  for (const MetricRecord& m : metrics) {
    if (m.repetition < 1) throw std::invalid_argument("metric " + m.name + ": repetitions count from 1");
    if (!m.value && m.na_reason.empty()) throw std::invalid_argument("metric " + m.name + ": a missing value needs na_reason");
    insert.add({case_id, std::int64_t{m.repetition}, m.name, m.value ? stored_real(*m.value) : SqlValue{}, m.na_reason, m.unit,
                std::string(clock_name(m.clock)), std::int64_t{m.extrapolated ? 1 : 0}, std::int64_t{m.noisy ? 1 : 0}});
  }
  insert.flush();
}

void ResultsStore::add_series(std::int64_t case_id, int repetition, const std::string& name, const std::vector<double>& values) {
  WriteTransaction tx(*this);
  insert_series(case_id, repetition, name, values);
  tx.commit();
}

void ResultsStore::insert_series(std::int64_t case_id, int repetition, const std::string& name, const std::vector<double>& values) {
  BatchInsert insert(*this, kSeriesInsert, 5);
  add_series_rows(insert, case_id, repetition, name, values);
  insert.flush();
}

}  // namespace kvbench
