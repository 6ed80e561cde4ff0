// A prepared statement with bound parameters and a write transaction, for the store's readers
// and retention (internal to baselines/).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "results_store.h"

namespace kvbench {

// A prepared statement with bound parameters; every binding and step is checked (a failure
// throws like any other of the store's: throw_sqlite_failure).
class Query {
 public:
  Query(ResultsStore& store, const std::string& sql) : Query(store, sql.c_str()) {}
  Query(ResultsStore& store, const char* sql) : db_(store.db()) {
    if (sqlite3_prepare_v2(db_, sql, -1, &stmt_, nullptr) != SQLITE_OK) throw_sqlite_failure(db_, "prepare");
  }
  ~Query() { sqlite3_finalize(stmt_); }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;
  Query& bind(int i, std::int64_t v) { return check(sqlite3_bind_int64(stmt_, i, v)); }
  Query& bind(int i, int v) { return check(sqlite3_bind_int(stmt_, i, v)); }
  Query& bind(int i, double v) { return check(sqlite3_bind_double(stmt_, i, v)); }
  Query& bind(int i, const std::string& v) {
    return check(sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  Query& bind_null(int i) { return check(sqlite3_bind_null(stmt_, i)); }
  // Column c of `row`'s current row, bound as it is stored (its type and value, NULL included).
  Query& bind_column(int i, const Query& row, int c) { return check(sqlite3_bind_value(stmt_, i, sqlite3_column_value(row.stmt_, c))); }
  // Steps a write to its end and makes the statement ready for new bindings.
  void run() {
    while (step()) {
    }
    check(sqlite3_reset(stmt_));
  }
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) throw_sqlite_failure(db_, "step");
    return false;
  }
  bool null(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }
  std::int64_t int64(int c) const { return sqlite3_column_int64(stmt_, c); }
  int columns() const { return sqlite3_column_count(stmt_); }
  double real(int c) const { return sqlite3_column_double(stmt_, c); }
  std::string text(int c) const {
    const auto* s = sqlite3_column_text(stmt_, c);
    return s == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(s));
  }

 private:
  Query& check(int rc) {
    if (rc != SQLITE_OK) throw_sqlite_failure(db_, "bind");
    return *this;
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// A write transaction that rolls back unless committed; BEGIN IMMEDIATE takes the write lock up
// front, so concurrent writers queue on the busy timeout instead of deadlocking.
class WriteTransaction {
 public:
  explicit WriteTransaction(ResultsStore& store) : db_(store.db()) { exec("BEGIN IMMEDIATE"); }
  ~WriteTransaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;
  void commit() {
    exec("COMMIT");
    done_ = true;
  }

 private:
  void exec(const char* sql) {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
      const std::string message = error != nullptr ? error : sqlite3_errmsg(db_);
      sqlite3_free(error);
      throw_sqlite_failure(db_, sql, message);
    }
  }
  sqlite3* db_;
  bool done_ = false;
};

}  // namespace kvbench
