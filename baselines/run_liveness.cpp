// Whether a run's writer is still alive, on this machine: a `running` run whose boot id is not
// this boot's, or whose pid is gone, was abandoned (results_store.h).
#include <signal.h>

#include <cerrno>
#include <fstream>

#include "results_store.h"
#include "sql_query.h"
#include "store_schema.h"

namespace kvbench {

bool run_process_gone(std::int64_t pid, const std::string& run_boot_id) {
  if (run_boot_id != boot_id()) return true;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

std::string reported_run_status(const std::string& stored, std::int64_t pid, const std::string& run_boot_id) {
  if (stored == "running" && run_process_gone(pid, run_boot_id)) return "aborted";
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
  Query select(*this, "SELECT id, status, started_at, coalesce(ended_at, ''), tags, pid, boot_id FROM runs ORDER BY id");
  while (select.step()) {
    RunRow row;
    row.id = select.int64(0);
    row.status = parse_run_status(reported_run_status(select.text(1), select.int64(5), select.text(6))).value_or(RunStatus::Aborted);
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
    Query select(*this, "SELECT id, pid, boot_id FROM runs WHERE status = 'running'");
    while (select.step()) {
      if (run_process_gone(select.int64(1), select.text(2))) gone.push_back(select.int64(0));
    }
  }
  Query update(*this, "UPDATE runs SET status = 'aborted', ended_at = ? WHERE id = ? AND status = 'running'");
  for (std::int64_t id : gone) update.bind(1, now_utc()).bind(2, id).run();
  tx.commit();
  return static_cast<int>(gone.size());
}

}  // namespace kvbench
