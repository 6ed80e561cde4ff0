#include "run_import.h"

#include <unistd.h>

#include <optional>

#include <fmt/format.h>

#include "retention.h"
#include "sql_query.h"
#include "store_schema.h"

namespace kvbench {

namespace {

// Every row `select` (one ? for the source case id) returns, inserted by `insert` (its head:
// "INSERT INTO table (columns)") after the new case id (its first column), column for column.
void copy_rows(ResultsStore& source, const char* select, std::int64_t source_case, ResultsStore& target, const char* insert,
               std::int64_t target_case) {
  Query rows(source, select);
  rows.bind(1, source_case);
  // A server's statement knows its columns once it has run: the batch is made at the first row.
  std::optional<BatchInsert> write;
  while (rows.step()) {
    if (!write) write.emplace(target, insert, rows.columns() + 1);
    std::vector<SqlValue> row{target_case};
    for (int c = 0; c < rows.columns(); ++c) row.push_back(rows.value(c));
    write->add(std::move(row));
  }
  if (write) write->flush();
}

std::int64_t copy_case(const ImportedCase& from, ResultsStore& target, std::int64_t run_id) {
  ResultsStore& source = *from.source;
  Query row(source, "SELECT name, model, workload, policy, soc, skipped_reason, status, error FROM cases WHERE id = ?");
  row.bind(1, from.case_id);
  if (!row.step()) throw kv::InputError(source.path(), "case", fmt::format("no case {} in this database", from.case_id));
  Query insert(target,
               "INSERT INTO cases (run_id, name, model, workload, policy, soc, skipped_reason, status, error)"
               " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id");
  insert.bind(1, run_id);
  for (int c = 0; c < 8; ++c) insert.bind_column(c + 2, row, c);
  const std::int64_t id = insert.insert_returning_id();
  copy_rows(source, "SELECT repetition, name, value, na_reason, unit, clock, extrapolated, noisy FROM metrics WHERE case_id = ?", from.case_id,
            target,
            "INSERT INTO metrics (case_id, repetition, name, value, na_reason, unit, clock, extrapolated, noisy)",
            id);
  copy_rows(source, "SELECT repetition, name, step, value FROM series WHERE case_id = ?", from.case_id, target,
            "INSERT INTO series (case_id, repetition, name, step, value)", id);
  copy_rows(source, "SELECT repetition, name, bin, count FROM histograms WHERE case_id = ?", from.case_id, target,
            "INSERT INTO histograms (case_id, repetition, name, bin, count)", id);
  copy_rows(source, "SELECT repetition, step, kind, detail, data FROM events WHERE case_id = ? ORDER BY rowid", from.case_id, target,
            "INSERT INTO events (case_id, repetition, step, kind, detail, data)", id);
  return id;
}

}  // namespace

void require_current_schema(const ResultsStore& source) {
  if (source.schema_version() == kSchemaVersion) return;
  throw kv::InputError(source.path(), "schema",
                       fmt::format("version {}, not this kvbench's {}: its runs are imported by the kvbench that wrote it",
                                   source.schema_version(), kSchemaVersion));
}

std::int64_t import_run(ResultsStore& target, const ImportedRun& run, const std::vector<ImportedCase>& cases) {
  for (const ImportedCase& c : cases) require_current_schema(*c.source);
  WriteTransaction tx(target);
  Query insert(target,
               "INSERT INTO runs (started_at, ended_at, status, pid, boot_id, heartbeat_at, git_sha, git_dirty, config_json,"
               " config_hash, tags, meta_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id");
  insert.bind(1, run.started_at).bind(2, run.ended_at).bind(3, std::string(run_status_name(run.status)));
  insert.bind(4, static_cast<std::int64_t>(::getpid())).bind(5, boot_id()).bind(6, run.ended_at);
  insert.bind(7, run.info.git_sha).bind(8, run.info.git_dirty ? 1 : 0).bind(9, run.info.config_json).bind(10, run.info.config_hash);
  insert.bind(11, join_tags(run.info.tags)).bind(12, run.info.meta_json);
  const std::int64_t run_id = insert.insert_returning_id();
  for (const ImportedCase& c : cases) copy_case(c, target, run_id);
  // A shard run a baseline or an acknowledgement names stays: removing it would take those too.
  for (const std::int64_t replaced : run.replaces) {
    if (!run_held(target, replaced)) remove_run_rows(target, replaced);
  }
  tx.commit();
  return run_id;
}

std::vector<std::pair<std::int64_t, std::string>> stored_cases(ResultsStore& store, std::int64_t run_id) {
  std::vector<std::pair<std::int64_t, std::string>> cases;
  Query q(store, "SELECT id, name FROM cases WHERE run_id = ? ORDER BY id");
  q.bind(1, run_id);
  while (q.step()) cases.emplace_back(q.int64(0), q.text(1));
  return cases;
}

}  // namespace kvbench
