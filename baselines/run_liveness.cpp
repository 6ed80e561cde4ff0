// Whether a run's writer is still alive (results_store.h): by its process on this machine, and
// on a server also by its heartbeat, which is all another machine can see.
#include <signal.h>

#include <cerrno>
#include <fstream>

#include "results_store.h"
#include "sql_query.h"
#include "store_schema.h"

namespace kvbench {

std::string run_writer_sql(SqlDialect dialect, const std::string& alias) {
  const std::string& a = alias;
  const std::string timeout = std::to_string(kDefaultHeartbeatTimeoutS);
  // A file is written from one machine: its pid and boot id decide, the beat is not read.
  if (dialect == SqlDialect::Sqlite) return a + ".pid, " + a + ".boot_id, 0, 0";
  // Only a running run's beat is read (an imported run's may be empty text).
  return a + ".pid, " + a + ".boot_id, CASE WHEN " + a + ".status = 'running' THEN CAST(extract(epoch FROM now() - CAST(" + a +
         ".heartbeat_at AS timestamptz)) AS BIGINT) ELSE 0 END, coalesce(CAST(" + json_text_sql(dialect, a + ".meta_json", "heartbeat_timeout_s") +
         " AS BIGINT), " + timeout + ")";
}

RunWriter run_writer_at(const Query& q, int first) {
  RunWriter w;
  w.pid = q.int64(first);
  w.boot_id = q.text(first + 1);
  w.beat_age_s = q.int64(first + 2);
  w.timeout_s = q.int64(first + 3);
  return w;
}

bool run_writer_gone(const RunWriter& writer, bool on_server) {
  // On a server the beat alone decides: containers on one host share its boot id but not their
  // pids, so a pid that is not ours to see may well be alive.
  if (on_server) return writer.beat_age_s > writer.timeout_s;
  if (writer.boot_id != boot_id()) return true;
  return ::kill(static_cast<pid_t>(writer.pid), 0) != 0 && errno == ESRCH;
}

std::string reported_run_status(const std::string& stored, const RunWriter& writer, bool on_server) {
  if (stored == "running" && run_writer_gone(writer, on_server)) return "aborted";
  return stored;
}

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

std::vector<RunRow> ResultsStore::runs() {
  std::vector<RunRow> rows;
  Query select(*this, "SELECT r.id, r.status, r.started_at, coalesce(r.ended_at, ''), r.tags, " + run_writer_sql(conn_->dialect(), "r") +
                          " FROM runs r ORDER BY r.id");
  while (select.step()) {
    RunRow row;
    row.id = select.int64(0);
    row.status = parse_run_status(reported_run_status(select.text(1), run_writer_at(select, 5), on_server())).value_or(RunStatus::Aborted);
    row.started_at = select.text(2);
    row.ended_at = select.text(3);
    row.tags = split_tags(select.text(4));
    rows.push_back(std::move(row));
  }
  return rows;
}

int ResultsStore::mark_abandoned_runs() {
  WriteTransaction tx(*this);
  std::vector<std::int64_t> gone;
  {
    Query select(*this, "SELECT r.id, " + run_writer_sql(conn_->dialect(), "r") + " FROM runs r WHERE r.status = 'running'");
    while (select.step()) {
      if (run_writer_gone(run_writer_at(select, 1), on_server())) gone.push_back(select.int64(0));
    }
  }
  Query update(*this, "UPDATE runs SET status = 'aborted', ended_at = ? WHERE id = ? AND status = 'running'");
  for (std::int64_t id : gone) update.bind(1, now_utc()).bind(2, id).run();
  tx.commit();
  return static_cast<int>(gone.size());
}

}  // namespace kvbench
