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
#include "store_schema.h"

namespace kvbench {

namespace {

int read_user_version(ResultsStore& store) {
  Query user_version(store, "PRAGMA user_version");
  return user_version.step() ? static_cast<int>(user_version.int64(0)) : 0;
}

std::int64_t table_count(ResultsStore& store) {
  Query tables(store, "SELECT count(*) FROM sqlite_master WHERE type = 'table'");
  return tables.step() ? tables.int64(0) : 0;
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
      schema_version_ = read_user_version(*this);
      const std::int64_t tables = table_count(*this);
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
  int version = read_user_version(*this);
  const int found = version;
  if (version > kSchemaVersion) {
    throw kv::InputError(path_, "schema_version",
                         "the database has schema version " + std::to_string(version) + "; this kvbench reads up to " +
                             std::to_string(kSchemaVersion) + " (use a newer kvbench)");
  }
  if (version == 0) {
    if (table_count(*this) > 0) {
      throw kv::InputError(path_, "schema_version", "not a kvbench database (tables without a kvbench schema version)");
    }
    exec(schema_step(1).c_str());
    version = 1;
  }
  // Each version's migration, in order (store_schema.h).
  for (; version < target; ++version) exec(schema_step(version + 1).c_str());
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
  Query insert(*this,
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
  Query update(*this, "UPDATE runs SET heartbeat_at = ? WHERE id = ?");
  update.bind(1, now_utc()).bind(2, run_id).run();
}

void ResultsStore::finish_run(std::int64_t run_id, RunStatus status) {
  Query update(*this, "UPDATE runs SET status = ?, ended_at = ? WHERE id = ?");
  update.bind(1, std::string(run_status_name(status))).bind(2, now_utc()).bind(3, run_id).run();
}

std::int64_t ResultsStore::add_case(std::int64_t run_id, const CaseInfo& info) {
  WriteTransaction tx(*this);
  Query insert(*this,
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
  Query update(*this, "UPDATE cases SET status = ?, error = ? WHERE id = ?");
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
  Query insert(*this, "INSERT INTO histograms (case_id, repetition, name, bin, count) VALUES (?, ?, ?, ?, ?)");
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
  Query insert(*this, "INSERT INTO events (case_id, repetition, step, kind, detail, data) VALUES (?, ?, ?, ?, ?, ?)");
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
  Query insert(*this,
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
  Query insert(*this, "INSERT INTO series (case_id, repetition, name, step, value) VALUES (?, ?, ?, ?, ?)");
  for (std::size_t i = 0; i < values.size(); ++i) {
    insert.bind(1, case_id).bind(2, repetition).bind(3, name).bind(4, static_cast<std::int64_t>(i)).bind(5, values[i]).run();
  }
}

}  // namespace kvbench
