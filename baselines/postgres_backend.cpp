// The PostgreSQL side of the store's SQL seam (sql_backend.h), through libpq. Statements run
// with PQexecParams: the parameters travel apart from the SQL text (never spliced into it), in
// text form, typed where the server cannot infer a type from the statement.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <vector>

#include "results_store.h"
#include "sql_backend.h"
#include "store_location.h"

#ifdef KVBENCH_WITH_POSTGRES
#include <libpq-fe.h>
#endif

namespace kvbench {

#ifdef KVBENCH_WITH_POSTGRES

namespace {

// Type oids of the parameters kvbench binds (pg_type.h); text goes as `unknown` (0), which the
// server types from the column or expression it meets.
constexpr Oid kInt8Oid = 20;
constexpr Oid kFloat8Oid = 701;

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (std::size_t at = s.find('\n'); at != std::string::npos; at = s.find('\n', at)) s.replace(at, 1, "; ");
  return s;
}

std::string real_text(double v) {
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return fmt::format("{}", v);  // the shortest text that reads back as the same double
}

class PgConnection;

class PgStatement final : public SqlStatement {
 public:
  PgStatement(PgConnection& connection, const std::string& sql);
  ~PgStatement() override { PQclear(result_); }
  void bind(int i, const SqlValue& v) override {
    if (i < 1) throw std::logic_error("bind: parameters count from 1");
    if (static_cast<std::size_t>(i) > values_.size()) {
      values_.resize(i);
      types_.resize(i, 0);
    }
    auto& slot = values_[i - 1];
    auto& type = types_[i - 1];
    if (std::holds_alternative<std::monostate>(v)) {
      slot.reset();
      type = 0;
    } else if (const auto* n = std::get_if<std::int64_t>(&v)) {
      slot = std::to_string(*n);
      type = kInt8Oid;
    } else if (const auto* d = std::get_if<double>(&v)) {
      slot = real_text(*d);
      type = kFloat8Oid;
    } else {
      slot = std::get<std::string>(v);
      type = 0;
    }
  }
  bool step() override;
  void reset() override {
    PQclear(result_);
    result_ = nullptr;
    row_ = -1;
  }
  int columns() const override { return result_ == nullptr ? 0 : PQnfields(result_); }
  bool null(int c) const override { return PQgetisnull(result_, row_, c) != 0; }
  std::int64_t int64(int c) const override {
    if (null(c)) return 0;
    const char* s = PQgetvalue(result_, row_, c);
    if (PQftype(result_, c) == 16) return s[0] == 't' ? 1 : 0;  // bool
    return std::strtoll(s, nullptr, 10);
  }
  double real(int c) const override { return null(c) ? 0.0 : std::strtod(PQgetvalue(result_, row_, c), nullptr); }
  std::string text(int c) const override {
    return null(c) ? std::string() : std::string(PQgetvalue(result_, row_, c), static_cast<std::size_t>(PQgetlength(result_, row_, c)));
  }
  SqlValue value(int c) const override {
    if (null(c)) return std::monostate{};
    switch (PQftype(result_, c)) {
      case 16: case 20: case 21: case 23: return int64(c);  // bool, int8, int2, int4
      case 700: case 701: case 1700: return real(c);       // float4, float8, numeric
      default: return text(c);
    }
  }
  std::int64_t changes() const override {
    const char* n = result_ == nullptr ? "" : PQcmdTuples(result_);
    return *n == '\0' ? 0 : std::strtoll(n, nullptr, 10);
  }

 private:
  PgConnection& connection_;
  std::string sql_;
  std::vector<std::optional<std::string>> values_;
  std::vector<Oid> types_;
  PGresult* result_ = nullptr;
  int row_ = -1;
};

class PgConnection final : public SqlConnection {
 public:
  explicit PgConnection(const std::string& location) : location_(location) {
    const std::string full = connect_string(location);
    // The URI's own connect_timeout, if it names one, comes later and wins; PGCONNECT_TIMEOUT
    // where set replaces the default.
    const char* env_timeout = std::getenv("PGCONNECT_TIMEOUT");
    const char* keys[] = {"connect_timeout", "fallback_application_name", "dbname", nullptr};
    const char* values[] = {env_timeout != nullptr && *env_timeout != '\0' ? env_timeout : "10", "kvbench", full.c_str(), nullptr};
    conn_ = PQconnectdbParams(keys, values, 1);
    if (conn_ == nullptr) throw DatabaseError(location_, "--db", "cannot connect: out of memory");
    if (PQstatus(conn_) != CONNECTION_OK) {
      const std::string reason = trimmed(PQerrorMessage(conn_));
      PQfinish(conn_);
      conn_ = nullptr;
      throw DatabaseError(location_, "--db", "cannot connect to the PostgreSQL server: " + reason);
    }
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
  }
  ~PgConnection() override { PQfinish(conn_); }
  SqlDialect dialect() const override { return SqlDialect::Postgres; }
  std::unique_ptr<SqlStatement> prepare(const std::string& sql) override { return std::make_unique<PgStatement>(*this, sql); }
  void exec(const std::string& sql) override {
    PGresult* r = PQexec(conn_, sql.c_str());
    check(r, sql);
    PQclear(r);
  }
  void begin_write() override {
    // A server takes BEGIN inside a transaction with a warning: a nested one would commit early.
    if (PQtransactionStatus(conn_) != PQTRANS_IDLE) throw std::logic_error("begin_write: a transaction is already open");
    exec("BEGIN");
  }
  void commit() override {
    // COMMIT of a transaction an error aborted answers ROLLBACK, not an error: nothing was written.
    PGresult* r = PQexec(conn_, "COMMIT");
    check(r, "COMMIT");
    const std::string tag = PQcmdStatus(r);
    PQclear(r);
    if (tag != "COMMIT") throw std::runtime_error("postgresql COMMIT: the server rolled the transaction back (" + tag + ")");
  }
  void rollback() noexcept override { PQclear(PQexec(conn_, "ROLLBACK")); }

  PGconn* handle() { return conn_; }
  // Throws for a result that is not a success: DatabaseError for the server's own condition
  // (gone, full, read-only, not permitted), std::runtime_error for anything else (a bug).
  void check(PGresult* r, const std::string& what) {
    const ExecStatusType status = r == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(r);
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return;
    const char* field = r == nullptr ? nullptr : PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const std::string state = field == nullptr ? "" : field;
    const std::string reason = trimmed(r != nullptr && *PQresultErrorMessage(r) != '\0' ? PQresultErrorMessage(r) : PQerrorMessage(conn_));
    PQclear(r);
    if (PQstatus(conn_) == CONNECTION_BAD || state.rfind("08", 0) == 0 || state.rfind("57P", 0) == 0) {
      throw DatabaseError(location_, "--db", "the PostgreSQL server went away: " + reason);
    }
    if (state.rfind("53", 0) == 0) throw DatabaseError(location_, "--db", "cannot write: " + reason + " (the server is out of resources)");
    if (state == "42501" || state == "25006") throw DatabaseError(location_, "--db", "cannot write: " + reason);
    throw std::runtime_error("postgresql " + what + ": " + reason);
  }

 private:
  std::string location_;
  PGconn* conn_ = nullptr;
};

PgStatement::PgStatement(PgConnection& connection, const std::string& sql) : connection_(connection), sql_(numbered_placeholders(sql)) {}

bool PgStatement::step() {
  if (result_ == nullptr) {
    std::vector<const char*> values(values_.size());
    for (std::size_t i = 0; i < values_.size(); ++i) values[i] = values_[i] ? values_[i]->c_str() : nullptr;
    PGresult* r = PQexecParams(connection_.handle(), sql_.c_str(), static_cast<int>(values.size()), types_.data(), values.data(), nullptr,
                               nullptr, 0);
    connection_.check(r, sql_);
    result_ = r;
    row_ = -1;
  }
  if (PQresultStatus(result_) != PGRES_TUPLES_OK) return false;
  if (row_ + 1 >= PQntuples(result_)) {
    row_ = PQntuples(result_);
    return false;
  }
  ++row_;
  return true;
}

}  // namespace

std::unique_ptr<SqlConnection> postgres_connection(const std::string& location) { return std::make_unique<PgConnection>(location); }

bool postgres_available() { return true; }

#else

std::unique_ptr<SqlConnection> postgres_connection(const std::string& location) {
  throw kv::InputError(location, "--db", kNoPostgresBuild);
}

bool postgres_available() { return false; }

#endif

std::string numbered_placeholders(const std::string& sql) {
  std::string out;
  out.reserve(sql.size() + 16);
  int next = 0;
  bool quoted = false;
  for (std::size_t i = 0; i < sql.size(); ++i) {
    const char ch = sql[i];
    if (ch == '\'') quoted = !quoted;
    if (ch != '?' || quoted) {
      out.push_back(ch);
      continue;
    }
    std::size_t end = i + 1;
    while (end < sql.size() && sql[end] >= '0' && sql[end] <= '9') ++end;
    const int n = end > i + 1 ? std::stoi(sql.substr(i + 1, end - i - 1)) : next + 1;
    next = std::max(next, n);
    out += "$" + std::to_string(n);
    i = end - 1;
  }
  return out;
}

}  // namespace kvbench
