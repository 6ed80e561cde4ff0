// A prepared read with bound parameters, for the store's readers (internal to baselines/).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "results_store.h"

namespace kvbench {

// A prepared read with bound parameters.
class Query {
 public:
  Query(ResultsStore& store, const char* sql) : db_(store.db()) {
    if (sqlite3_prepare_v2(db_, sql, -1, &stmt_, nullptr) != SQLITE_OK) throw std::runtime_error(std::string("sqlite prepare: ") + sqlite3_errmsg(db_));
  }
  ~Query() { sqlite3_finalize(stmt_); }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;
  Query& bind(int i, std::int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Query& bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) throw std::runtime_error(std::string("sqlite step: ") + sqlite3_errmsg(db_));
    return false;
  }
  bool null(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }
  std::int64_t int64(int c) const { return sqlite3_column_int64(stmt_, c); }
  double real(int c) const { return sqlite3_column_double(stmt_, c); }
  std::string text(int c) const {
    const auto* s = sqlite3_column_text(stmt_, c);
    return s == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(s));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};


}  // namespace kvbench
