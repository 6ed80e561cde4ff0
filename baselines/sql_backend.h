// The seam between the store's SQL and the database that runs it (internal to baselines/): a
// connection and its statements, implemented for SQLite (sqlite_backend.cpp) and PostgreSQL
// (postgres_backend.cpp). The SQL the store writes is one text for both; where the dialects
// differ the store asks the connection (SqlDialect); the few dialect texts are now_sql() and
// json_text_sql() below, and the schema's in store_schema.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>

struct sqlite3;

namespace kvbench {

enum class SqlDialect : std::uint8_t { Sqlite, Postgres };

// A value as a statement binds or returns it: NULL, an integer, a real or text.
using SqlValue = std::variant<std::monostate, std::int64_t, double, std::string>;

// One statement with `?` or `?N` parameters (numbered from 1). step() runs it with the current
// bindings on its first call and then walks its rows; reset() makes it ready to run again (the
// bindings stay until bound anew).
class SqlStatement {
 public:
  virtual ~SqlStatement() = default;
  virtual void bind(int i, const SqlValue& value) = 0;
  virtual bool step() = 0;
  virtual void reset() = 0;
  // The result's columns: known once step() has run (a server describes a result as it sends it).
  virtual int columns() const = 0;
  virtual bool null(int c) const = 0;
  virtual std::int64_t int64(int c) const = 0;
  virtual double real(int c) const = 0;
  virtual std::string text(int c) const = 0;
  // Column c as stored: its type and value (NULL included).
  virtual SqlValue value(int c) const = 0;
  // Rows the statement's last run inserted, updated or deleted.
  virtual std::int64_t changes() const = 0;
};

class SqlConnection {
 public:
  virtual ~SqlConnection() = default;
  virtual SqlDialect dialect() const = 0;
  virtual std::unique_ptr<SqlStatement> prepare(const std::string& sql) = 0;
  // Statements without parameters or results, run in order.
  virtual void exec(const std::string& sql) = 0;
  // A write transaction: SQLite takes the write lock up front (BEGIN IMMEDIATE) so concurrent
  // writers queue on the busy timeout; PostgreSQL's row locks let writers run side by side.
  virtual void begin_write() = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;
  // The SQLite handle (tests and the SQLite-only setup), nullptr on another backend.
  virtual sqlite3* sqlite_handle() { return nullptr; }
};

// A real as the store keeps it: NaN as NULL on every backend (SQLite has no NaN; readers map
// NULL back to NaN).
inline SqlValue stored_real(double v) { return std::isnan(v) ? SqlValue{} : SqlValue{v}; }

// SQL for the database's clock now, in the store's time format ("2026-12-01T20:49:34Z").
std::string now_sql(SqlDialect dialect);
// SQL for the text of the top-level field `key` of JSON text column `column` (NULL if absent).
std::string json_text_sql(SqlDialect dialect, const std::string& column, const std::string& key);

// SQLite: wraps an open handle, which it closes.
std::unique_ptr<SqlConnection> sqlite_connection(sqlite3* db);

// PostgreSQL: connects to `location` (a URI without its password: store_location.h) with
// libpq's conventions (PGPASSFILE, PGSSLMODE, ...). Throws DatabaseError naming the location
// when the server cannot be reached or refuses the login.
std::unique_ptr<SqlConnection> postgres_connection(const std::string& location);

// SQL with SQLite's `?` and `?N` parameters in PostgreSQL's `$N` (outside quoted text).
std::string numbered_placeholders(const std::string& sql);

// Whether this build has the PostgreSQL backend (a build without libpq refuses a URI, saying
// kNoPostgresBuild).
bool postgres_available();
inline constexpr const char* kNoPostgresBuild = "this kvbench was built without PostgreSQL (libpq): a results database here is a file";

}  // namespace kvbench
