#include "sql_query.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvbench {

void BatchInsert::add(std::vector<SqlValue> row) {
  if (static_cast<int>(row.size()) != columns_) throw std::logic_error("BatchInsert: a row of " + std::to_string(row.size()) + " values for " + head_);
  for (SqlValue& v : row) pending_.push_back(std::move(v));
  const int rows = store_.connection().dialect() == SqlDialect::Postgres ? kRowsPerArrays : kRowsPerStatement;
  if (pending_.size() >= static_cast<std::size_t>(rows * columns_)) flush();
}

namespace {

// A value in an array literal's text ({1,2}, {"a b",NULL}).
void append_element(std::string& out, const SqlValue& v) {
  if (std::holds_alternative<std::monostate>(v)) {
    out += "NULL";
  } else if (const auto* n = std::get_if<std::int64_t>(&v)) {
    out += std::to_string(*n);
  } else if (const auto* d = std::get_if<double>(&v)) {
    out += std::isinf(*d) ? (*d > 0 ? "Infinity" : "-Infinity") : fmt::format("{}", *d);
  } else {
    out += '"';
    for (const char ch : std::get<std::string>(v)) {
      if (ch == '"' || ch == '\\') out += '\\';
      out += ch;
    }
    out += '"';
  }
}

}  // namespace

std::string postgres_array_literal(const std::vector<SqlValue>& values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    append_element(out, values[i]);
  }
  return out + "}";
}

void BatchInsert::flush() {
  if (pending_.empty()) return;
  const std::size_t rows = pending_.size() / static_cast<std::size_t>(columns_);
  if (store_.connection().dialect() == SqlDialect::Postgres) {
    flush_arrays(rows);
  } else {
    std::string sql = head_ + " VALUES ";
    std::string row = "(";
    for (int c = 0; c < columns_; ++c) row += c == 0 ? "?" : ", ?";
    row += ")";
    for (std::size_t r = 0; r < rows; ++r) sql += (r == 0 ? "" : ", ") + row;
    Query insert(store_, sql);
    for (std::size_t i = 0; i < pending_.size(); ++i) bind_value(insert, static_cast<int>(i) + 1, pending_[i]);
    insert.run();
  }
  pending_.clear();
}

// A server parses a statement of thousands of parameters slowly: each column travels as one
// array instead, unnested in the rows' order (identity ids and rowid follow it).
void BatchInsert::flush_arrays(std::size_t rows) {
  std::string select = " SELECT ";
  std::string from = " FROM unnest(";
  std::string names;
  std::vector<std::string> arrays;
  for (int c = 0; c < columns_; ++c) {
    // The column's type from its values: integers, reals (integers among them read as reals) or
    // text; a column of NULLs alone is written as NULL.
    int kind = 0;  // 0 none, 1 integer, 2 real, 3 text
    for (std::size_t r = 0; r < rows; ++r) {
      const SqlValue& v = pending_[r * static_cast<std::size_t>(columns_) + static_cast<std::size_t>(c)];
      if (std::holds_alternative<std::int64_t>(v)) kind = std::max(kind, 1);
      else if (std::holds_alternative<double>(v)) kind = std::max(kind, 2);
      else if (std::holds_alternative<std::string>(v)) kind = 3;
    }
    const std::string name = "c" + std::to_string(c);
    select += (c == 0 ? "" : ", ") + (kind == 0 ? std::string("NULL") : name);
    if (kind == 0) continue;
    std::vector<SqlValue> column;
    column.reserve(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      const SqlValue& v = pending_[r * static_cast<std::size_t>(columns_) + static_cast<std::size_t>(c)];
      if (kind == 3 && !std::holds_alternative<std::string>(v) && !std::holds_alternative<std::monostate>(v)) {
        std::string text;
        append_element(text, v);
        column.emplace_back(std::move(text));
      } else {
        column.push_back(v);
      }
    }
    arrays.push_back(postgres_array_literal(column));
    from += (arrays.size() == 1 ? "?::" : ", ?::") + std::string(kind == 1 ? "bigint[]" : kind == 2 ? "double precision[]" : "text[]");
    names += name + ", ";
  }
  Query insert(store_, head_ + select + from + ") WITH ORDINALITY AS u(" + names + "n) ORDER BY n");
  for (std::size_t i = 0; i < arrays.size(); ++i) insert.bind(static_cast<int>(i) + 1, arrays[i]);
  insert.run();
}

void BatchInsert::bind_value(Query& insert, int at, const SqlValue& v) {
  std::visit(
      [&](const auto& x) {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::monostate>) insert.bind_null(at);
        else insert.bind(at, x);
      },
      v);
}

std::string table_count_sql(SqlDialect dialect) {
  return dialect == SqlDialect::Sqlite ? "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                                       : "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()";
}

std::int64_t table_count(ResultsStore& store) {
  Query tables(store, table_count_sql(store.connection().dialect()));
  return tables.step() ? tables.int64(0) : 0;
}

bool has_table(ResultsStore& store, const std::string& name) {
  const std::string named = store.on_server() ? " AND table_name = ?" : " AND name = ?";
  Query q(store, table_count_sql(store.connection().dialect()) + named);
  q.bind(1, name);
  return q.step() && q.int64(0) > 0;
}

std::string now_sql(SqlDialect dialect) {
  return dialect == SqlDialect::Sqlite ? "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"
                                       : "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')";
}

std::string json_text_sql(SqlDialect dialect, const std::string& column, const std::string& key) {
  // A server refuses to cast text that is not JSON (SQLite's json_extract refuses it too, but
  // only text that is not JSON at all: an object is all kvbench writes).
  return dialect == SqlDialect::Sqlite ? "json_extract(" + column + ", '$." + key + "')"
                                       : "(CASE WHEN left(" + column + ", 1) = '{' THEN " + column + "::json ->> '" + key + "' END)";
}

}  // namespace kvbench
