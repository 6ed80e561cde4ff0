// The SQLite side of the store's SQL seam (sql_backend.h).
#include <sqlite3.h>

#include <cstring>
#include <stdexcept>

#include "results_store.h"
#include "sql_backend.h"

namespace kvbench {

namespace {

class SqliteStatement final : public SqlStatement {
 public:
  SqliteStatement(sqlite3* db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) throw_sqlite_failure(db_, "prepare");
  }
  ~SqliteStatement() override { sqlite3_finalize(stmt_); }
  void bind(int i, const SqlValue& v) override {
    int rc = SQLITE_OK;
    if (std::holds_alternative<std::monostate>(v)) rc = sqlite3_bind_null(stmt_, i);
    else if (const auto* n = std::get_if<std::int64_t>(&v)) rc = sqlite3_bind_int64(stmt_, i, *n);
    else if (const auto* d = std::get_if<double>(&v)) rc = sqlite3_bind_double(stmt_, i, *d);
    else {
      const std::string& s = std::get<std::string>(v);
      rc = sqlite3_bind_text(stmt_, i, s.c_str(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    }
    if (rc != SQLITE_OK) throw_sqlite_failure(db_, "bind");
  }
  bool step() override {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) throw_sqlite_failure(db_, "step");
    changes_ = sqlite3_changes(db_);
    return false;
  }
  void reset() override {
    if (sqlite3_reset(stmt_) != SQLITE_OK) throw_sqlite_failure(db_, "reset");
  }
  int columns() const override { return sqlite3_column_count(stmt_); }
  bool null(int c) const override { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }
  std::int64_t int64(int c) const override { return sqlite3_column_int64(stmt_, c); }
  double real(int c) const override { return sqlite3_column_double(stmt_, c); }
  std::string text(int c) const override {
    const auto* s = sqlite3_column_text(stmt_, c);
    return s == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(s), sqlite3_column_bytes(stmt_, c));
  }
  SqlValue value(int c) const override {
    switch (sqlite3_column_type(stmt_, c)) {
      case SQLITE_NULL: return std::monostate{};
      case SQLITE_INTEGER: return int64(c);
      case SQLITE_FLOAT: return real(c);
      default: return text(c);
    }
  }
  std::int64_t changes() const override { return changes_; }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::int64_t changes_ = 0;
};

class SqliteConnection final : public SqlConnection {
 public:
  explicit SqliteConnection(sqlite3* db) : db_(db) {}
  ~SqliteConnection() override { sqlite3_close(db_); }
  SqlDialect dialect() const override { return SqlDialect::Sqlite; }
  std::unique_ptr<SqlStatement> prepare(const std::string& sql) override { return std::make_unique<SqliteStatement>(db_, sql); }
  void exec(const std::string& sql) override {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      const std::string message = error != nullptr ? error : sqlite3_errmsg(db_);
      sqlite3_free(error);
      throw_sqlite_failure(db_, sql, message);
    }
  }
  void begin_write() override { exec("BEGIN IMMEDIATE"); }
  void commit() override { exec("COMMIT"); }
  void rollback() noexcept override { sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr); }
  sqlite3* sqlite_handle() override { return db_; }

 private:
  sqlite3* db_;
};

}  // namespace

std::unique_ptr<SqlConnection> sqlite_connection(sqlite3* db) { return std::make_unique<SqliteConnection>(db); }

}  // namespace kvbench
