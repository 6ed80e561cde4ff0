// A prepared statement with bound parameters and a write transaction, for the store's writers,
// readers and retention (internal to baselines/). The SQL is one text for every backend
// (sql_backend.h); failures throw as the store's do (DatabaseError for the database's own
// condition, std::runtime_error for a bug).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "results_store.h"
#include "sql_backend.h"

namespace kvbench {

class Query {
 public:
  Query(ResultsStore& store, const std::string& sql) : stmt_(store.connection().prepare(sql)) {}
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;
  Query& bind(int i, std::int64_t v) { return set(i, v); }
  Query& bind(int i, int v) { return set(i, static_cast<std::int64_t>(v)); }
  // NaN is stored as NULL on every backend (SQLite has no NaN); readers map NULL back.
  Query& bind(int i, double v) { return std::isnan(v) ? bind_null(i) : set(i, v); }
  Query& bind(int i, const std::string& v) { return set(i, v); }
  Query& bind_null(int i) { return set(i, std::monostate{}); }
  // Column c of `row`'s current row, bound as it is stored (its type and value, NULL included).
  Query& bind_column(int i, const Query& row, int c) { return set(i, row.stmt_->value(c)); }
  // Steps a write to its end and makes the statement ready for new bindings.
  void run() {
    while (step()) {
    }
    stmt_->reset();
  }
  // Runs an INSERT ... RETURNING id and gives the new row's id.
  std::int64_t insert_returning_id() {
    if (!step()) throw std::logic_error("insert_returning_id: the statement returned no row");
    const std::int64_t id = int64(0);
    run();
    return id;
  }
  // Runs a write and gives how many rows it changed.
  std::int64_t run_counting_changes() {
    while (step()) {
    }
    const std::int64_t changed = stmt_->changes();
    stmt_->reset();
    return changed;
  }
  bool step() { return stmt_->step(); }
  bool null(int c) const { return stmt_->null(c); }
  std::int64_t int64(int c) const { return stmt_->int64(c); }
  int columns() const { return stmt_->columns(); }
  double real(int c) const { return stmt_->real(c); }
  std::string text(int c) const { return stmt_->text(c); }
  SqlValue value(int c) const { return stmt_->value(c); }

 private:
  Query& set(int i, const SqlValue& v) {
    stmt_->bind(i, v);
    return *this;
  }
  std::unique_ptr<SqlStatement> stmt_;
};

// Rows inserted many at a time: one statement of up to kRowsPerStatement rows of VALUES, so a
// repetition's thousands of series points cost a handful of round trips to a server instead of
// one each. add() takes a row's values in column order; flush() writes the rest (call it before
// the transaction commits: rows not flushed are not written).
class BatchInsert {
 public:
  // `head`: "INSERT INTO table (columns...)"; `columns`: how many values a row has.
  BatchInsert(ResultsStore& store, std::string head, int columns) : store_(store), head_(std::move(head)), columns_(columns) {}
  BatchInsert(const BatchInsert&) = delete;
  BatchInsert& operator=(const BatchInsert&) = delete;
  void add(std::vector<SqlValue> row);
  void flush();

 private:
  void flush_arrays(std::size_t rows);
  static void bind_value(Query& insert, int at, const SqlValue& v);
  static constexpr int kRowsPerStatement = 256;  // SQLite: 256 rows of 9 values stay under its 32,766 parameters
  static constexpr int kRowsPerArrays = 8192;
  ResultsStore& store_;
  std::string head_;
  int columns_;
  std::vector<SqlValue> pending_;
};

// SQL counting the database's tables (of the current schema on a server).
std::string table_count_sql(SqlDialect dialect);
std::int64_t table_count(ResultsStore& store);
bool has_table(ResultsStore& store, const std::string& name);

// The text of a PostgreSQL array of `values` ({1,NULL}, {"a \"b\""}): what BatchInsert sends a
// server for one column.
std::string postgres_array_literal(const std::vector<SqlValue>& values);

// A write transaction that rolls back unless committed.
class WriteTransaction {
 public:
  explicit WriteTransaction(ResultsStore& store) : connection_(store.connection()) { connection_.begin_write(); }
  ~WriteTransaction() {
    if (!done_) connection_.rollback();
  }
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;
  void commit() {
    connection_.commit();
    done_ = true;
  }

 private:
  SqlConnection& connection_;
  bool done_ = false;
};

}  // namespace kvbench
