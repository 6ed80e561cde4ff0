// What comparing runs leaves in the store: named baselines, gate verdicts, acknowledgements of
// accepted regressions and detected change points (results_store.h).
#include "results_store.h"
#include "sql_query.h"

namespace kvbench {

void ResultsStore::set_baseline(const std::string& name, std::int64_t run_id, const std::string& reason) {
  WriteTransaction tx(*this);
  Query upsert(*this,
                   "INSERT INTO baselines (name, run_id, set_at, reason) VALUES (?, ?, ?, ?)"
                   " ON CONFLICT(name) DO UPDATE SET run_id = excluded.run_id, set_at = excluded.set_at, reason = excluded.reason");
  upsert.bind(1, name).bind(2, run_id).bind(3, now_utc()).bind(4, reason).run();
  tx.commit();
}

bool ResultsStore::remove_baseline(const std::string& name) {
  WriteTransaction tx(*this);
  Query remove(*this, "DELETE FROM baselines WHERE name = ?");
  const bool removed = remove.bind(1, name).run_counting_changes() > 0;
  tx.commit();
  return removed;
}

std::int64_t ResultsStore::add_verdict(const VerdictRecord& v) {
  WriteTransaction tx(*this);
  Query insert(*this,
                   "INSERT INTO verdicts (created_at, baseline_run, candidate_run, outcome, regressed, improved, inconclusive,"
                   " rules_json, rows_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id");
  insert.bind(1, now_utc()).bind(2, v.baseline_run).bind(3, v.candidate_run).bind(4, v.outcome).bind(5, v.regressed);
  insert.bind(6, v.improved).bind(7, v.inconclusive).bind(8, v.rules_json).bind(9, v.rows_json);
  const std::int64_t id = insert.insert_returning_id();
  tx.commit();
  return id;
}

std::int64_t ResultsStore::add_ack(std::int64_t run_id, std::int64_t baseline_run, const std::string& case_glob,
                                   const std::string& metric, const std::string& reason) {
  WriteTransaction tx(*this);
  Query insert(*this,
                   "INSERT INTO acks (run_id, baseline_run, case_glob, metric_glob, reason, created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id");
  insert.bind(1, run_id).bind(2, baseline_run).bind(3, case_glob).bind(4, metric).bind(5, reason).bind(6, now_utc());
  const std::int64_t id = insert.insert_returning_id();
  tx.commit();
  return id;
}

bool ResultsStore::remove_ack(std::int64_t id) {
  WriteTransaction tx(*this);
  Query remove(*this, "DELETE FROM acks WHERE id = ?");
  const bool removed = remove.bind(1, id).run_counting_changes() > 0;
  tx.commit();
  return removed;
}

void ResultsStore::replace_change_points(const std::string& case_name, const std::string& metric,
                                         const std::vector<ChangePointRecord>& points) {
  WriteTransaction tx(*this);
  Query remove(*this, "DELETE FROM change_points WHERE case_name = ? AND metric = ?");
  remove.bind(1, case_name).bind(2, metric).run();
  Query insert(*this,
                   "INSERT INTO change_points (run_id, case_name, metric, before_value, after_value, detected_at, detail)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?)");
  for (const ChangePointRecord& p : points) {
    insert.bind(1, p.run_id).bind(2, case_name).bind(3, metric).bind(4, p.before).bind(5, p.after).bind(6, now_utc()).bind(7, p.detail).run();
  }
  tx.commit();
}

}  // namespace kvbench
