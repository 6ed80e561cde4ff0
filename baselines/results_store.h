// The results store: one SQLite database that every run appends to and every later tool
// (gate, reports, cross-SoC comparison) reads. WAL journal, a busy timeout and foreign keys;
// every write in a transaction; SQL only with bound parameters.
//
// Runs have a status: `running` (with its pid, the boot id and a heartbeat), `complete`,
// `failed`, `interrupted` (stopped by SIGINT/SIGTERM, its finished repetitions kept) or
// `aborted`. Opening the store for writing marks `aborted` the running runs whose process is
// gone (another boot, or no such pid), so two processes can write one database at once and a
// killed run is never taken for a finished one. Readers open it read-only: they never write,
// never create a schema, and report such a run as aborted without marking it.
//
// The view metric_values(run_id, run_status, case_name, model, workload, policy, soc,
// repetition, name, value, na_reason, unit, clock, extrapolated, noisy) is the contract the
// readers use; repetitions count from 1, `value` is NULL with an `na_reason` when a metric does
// not apply.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "metric_table.h"
#include "runtime/error.h"
#include "run_event.h"
#include "sql_backend.h"

namespace kvbench {

inline constexpr int kSchemaVersion = 8;
// The oldest schema the read-only tools read as it is (writers migrate anything older).
inline constexpr int kOldestReadableSchema = 2;

enum class RunStatus : std::uint8_t { Running, Complete, Failed, Aborted, Interrupted };
const char* run_status_name(RunStatus status);
// The status a name stands for; nullopt for a name no schema has.
std::optional<RunStatus> parse_run_status(const std::string& name);

// A case: running until its repetitions are stored, skipped (could not run, with its reason),
// failed (an error stopped it; the message is kept).
enum class CaseStatus : std::uint8_t { Running, Complete, Skipped, Failed };
const char* case_status_name(CaseStatus status);

struct RunInfo {
  std::string git_sha;
  bool git_dirty = false;
  std::string config_json;  // the resolved configuration, every default filled in
  std::string config_hash;
  std::vector<std::string> tags;
  std::string meta_json;    // machine, compiler, OS, L2 filesystem...
};

struct CaseInfo {
  std::string model, workload, policy, soc;
  std::string skipped_reason;  // non-empty: the case could not run, and why
  std::string name() const { return model + "/" + workload + "/" + policy + "/" + soc; }
};

struct MetricRecord {
  int repetition = 1;  // from 1
  std::string name;
  std::optional<double> value;  // nullopt: does not apply, na_reason says why
  std::string na_reason;
  std::string unit;
  Clock clock = Clock::Exact;
  bool extrapolated = false;
  bool noisy = false;
};

// Everything one repetition of a case stores; written in one transaction, so a repetition is
// either whole in the database or absent.
struct RepetitionRecord {
  int repetition = 1;
  std::vector<MetricRecord> metrics;
  std::vector<std::pair<std::string, std::vector<double>>> series;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> histograms;
  std::vector<RunEvent> events;
};

// What writing repetitions cost: their count and the time add_repetition took (host clock).
struct StoreWrites {
  int repetitions = 0;
  double seconds = 0.0;
};

struct RunRow {
  std::int64_t id = 0;
  RunStatus status = RunStatus::Running;  // as reported: a running run whose process is gone reads aborted
  std::string started_at, ended_at;
  std::vector<std::string> tags;
};

enum class Access : std::uint8_t { ReadWrite, ReadOnly };

// The database file's own condition stopped a read or a write: damaged, not a database, full,
// an I/O error, read-only or not permitted. It names the file (exit 2); a run it stops is
// marked failed where the file still takes that, never left to read as aborted.
class DatabaseError : public kv::InputError {
 public:
  using kv::InputError::InputError;
};
// Throws DatabaseError(file, "--db", reason) for such a failure of `db`, std::runtime_error
// ("sqlite WHAT: message") for any other (a bug). message: sqlite3_exec's, else sqlite3_errmsg.
[[noreturn]] void throw_sqlite_failure(sqlite3* db, const std::string& what, const std::string& message = "");

class ResultsStore {
 public:
  // ReadWrite opens or creates the database and migrates it to this binary's schema.
  // ReadOnly opens an existing database without writing anything: it works on a 0444 file, in a
  // read-only directory and on an immutable file, and refuses a file with no kvbench schema (an
  // empty or foreign file) instead of creating one. Both throw kv::InputError naming the file
  // for a database that cannot be opened, is not a kvbench database, or has a newer schema than
  // this binary.
  explicit ResultsStore(const std::string& path, Access access = Access::ReadWrite);
  ~ResultsStore();
  ResultsStore(const ResultsStore&) = delete;
  ResultsStore& operator=(const ResultsStore&) = delete;

  std::int64_t begin_run(const RunInfo& info);
  void heartbeat(std::int64_t run_id);
  void finish_run(std::int64_t run_id, RunStatus status);
  std::int64_t add_case(std::int64_t run_id, const CaseInfo& info);
  // One repetition: metrics, series, histograms and events in one transaction.
  void add_repetition(std::int64_t case_id, const RepetitionRecord& record);
  // One repetition's metrics of a case, in one transaction.
  void add_metrics(std::int64_t case_id, const std::vector<MetricRecord>& metrics);
  void add_series(std::int64_t case_id, int repetition, const std::string& name, const std::vector<double>& values);
  // Events are stored as their kind, step, fields (JSON) and a line for people (describe()).
  void add_events(std::int64_t case_id, int repetition, const std::vector<RunEvent>& events);
  void add_histogram(std::int64_t case_id, int repetition, const std::string& name, const std::vector<std::int64_t>& counts);
  void finish_case(std::int64_t case_id, CaseStatus status, const std::string& error = "");
  StoreWrites writes() const { return writes_; }

  // A named baseline points at a run (replacing an earlier one of that name); remove: whether
  // there was one.
  void set_baseline(const std::string& name, std::int64_t run_id, const std::string& reason);
  bool remove_baseline(const std::string& name);
  struct VerdictRecord {
    std::int64_t baseline_run = 0, candidate_run = 0;
    std::string outcome;  // pass, fail, inconclusive, unreliable, definition-changed
    int regressed = 0, improved = 0, inconclusive = 0;
    std::string rules_json, rows_json;
  };
  std::int64_t add_verdict(const VerdictRecord& verdict);
  // An accepted regression: `metric` of the cases `case_glob` names, regressed in `run_id`
  // against `baseline_run`. Returns its id; remove: whether there was one.
  std::int64_t add_ack(std::int64_t run_id, std::int64_t baseline_run, const std::string& case_glob, const std::string& metric,
                       const std::string& reason);
  bool remove_ack(std::int64_t id);
  // The change points found in one case's history of one metric, replacing those stored before.
  struct ChangePointRecord {
    std::int64_t run_id = 0;  // the first run after the change
    double before = 0.0, after = 0.0;
    std::string detail;
  };
  void replace_change_points(const std::string& case_name, const std::string& metric, const std::vector<ChangePointRecord>& points);

  std::vector<RunRow> runs();
  // Marks aborted the running runs whose process is gone; returns how many.
  int mark_abandoned_runs();
  // The SQLite handle of a file store (tests), nullptr for a server.
  sqlite3* db() { return db_; }
  SqlConnection& connection() { return *conn_; }
  bool on_server() const { return conn_->dialect() == SqlDialect::Postgres; }
  // The file, or the server's URI without its password.
  const std::string& path() const { return path_; }
  int schema_version() const { return schema_version_; }
  // The SQL expression of the stored fields of events row `alias` (JSON text): its data column,
  // or - in a database older than typed events, opened read-only and so not migrated - the same
  // conversion from its text that the migration to version 7 applies once.
  std::string event_data_sql(const std::string& alias) const;
  // Tests: a new, empty database at an earlier schema version, to migrate from.
  static void create_at_version(const std::string& path, int version);
  Access access() const { return access_; }

 private:
  ResultsStore(const std::string& path, Access, int version);  // create_at_version
  void exec(const std::string& sql);
  void open_postgres();
  void close();
  void migrate();
  void migrate_to(int version);
  void open_read_only();
  void insert_metrics(std::int64_t case_id, const std::vector<MetricRecord>& metrics);
  void insert_series(std::int64_t case_id, int repetition, const std::string& name, const std::vector<double>& values);
  void insert_histogram(std::int64_t case_id, int repetition, const std::string& name, const std::vector<std::int64_t>& counts);
  void insert_events(std::int64_t case_id, int repetition, const std::vector<RunEvent>& events);

  std::string path_;
  Access access_ = Access::ReadWrite;
  int schema_version_ = 0;
  std::unique_ptr<SqlConnection> conn_;
  sqlite3* db_ = nullptr;  // conn_'s handle for a file store
  StoreWrites writes_;
};

// Whether `db` holds a store to read: a file that exists, or a server database with any table (a
// new, empty server database is like a file not yet written). Connecting to a server that cannot
// be reached throws DatabaseError.
bool store_exists(const std::string& db);

// Why a writer could not write the database file `db` (or the journal beside it) as this user,
// with what to do, or "" when it could (always "" for a server).
std::string file_store_write_problem(const std::string& db);

// How long a run on a server may go without a heartbeat before it is taken for abandoned, unless
// the run states its own (`kvbench run --heartbeat-timeout`, kept in its metadata).
inline constexpr int kDefaultHeartbeatTimeoutS = 120;

// What tells whether a `running` run's writer is alive: its process (on this machine) and, on a
// server that many machines write, its last heartbeat by the server's clock.
struct RunWriter {
  std::int64_t pid = 0;
  std::string boot_id;
  std::int64_t beat_age_s = 0;  // seconds since its last heartbeat, by the database's clock
  std::int64_t timeout_s = kDefaultHeartbeatTimeoutS;
};
// SQL for the four columns of a RunWriter of runs row `alias` (pid, boot_id, beat age, timeout).
std::string run_writer_sql(SqlDialect dialect, const std::string& alias);
// The RunWriter of those four columns from column `first`.
class Query;
RunWriter run_writer_at(const Query& q, int first);

// Whether a `running` run's writer is gone. In a file: another boot, or no such pid. On a server
// (another machine, or another container of this one, may be writing): a heartbeat older than
// the run's timeout.
bool run_writer_gone(const RunWriter& writer, bool on_server);
// The status readers show: a `running` run whose writer is gone is reported aborted.
std::string reported_run_status(const std::string& stored, const RunWriter& writer, bool on_server);

// The kernel's boot id (/proc/sys/kernel/random/boot_id), "" when unreadable.
std::string boot_id();

// Now as the store writes times: "2026-12-01T20:49:34Z".
std::string now_utc();

}  // namespace kvbench
