// Retention: which old runs go and which stay (baselines, acknowledgements, a live process, the
// newest per suite, the baselines of kept runs' verdicts), that a removed run leaves no row in
// any table, that a plan gone stale spares a run held since, and that the space comes back.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "results_reader.h"
#include "results_store.h"
#include "retention.h"
#include "runtime/error.h"
#include "test_support.h"

using namespace kvbench;

namespace {

constexpr const char* kNow = "2026-06-01T00:00:00Z";  // 30 days: the cutoff is 2026-05-02T00:00:00Z

void exec_sql(ResultsStore& store, const std::string& sql) {
  char* error = nullptr;
  const int rc = sqlite3_exec(store.db(), sql.c_str(), nullptr, nullptr, &error);
  INFO(sql << ": " << (error != nullptr ? error : ""));
  sqlite3_free(error);
  REQUIRE(rc == SQLITE_OK);
}

std::int64_t count(ResultsStore& store, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(store.db(), sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
  const std::int64_t n = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return n;
}

// A run of `suite` started at `started_at` with one case holding one repetition of everything a
// case stores; left running when `status` is Running.
std::int64_t add_run(ResultsStore& store, const std::string& suite, const std::string& started_at, RunStatus status) {
  RunInfo info;
  info.git_sha = "abc123";
  info.config_json = "{}";
  info.config_hash = "h";
  info.meta_json = R"({"suite": ")" + suite + R"("})";
  const std::int64_t run = store.begin_run(info);
  const std::int64_t c = store.add_case(run, {"syn-7b", "rag-2k", "q4-hybrid", "host", ""});
  RepetitionRecord rep;
  rep.metrics = {{1, "ttft_ms", 12.5, "", "ms", Clock::Host, false, false}, {1, "token_drop_ratio", 0.9, "", "ratio", Clock::Exact, false, false}};
  rep.series = {{"l1_used_bytes", std::vector<double>(4000, 1.5)}};
  rep.histograms = {{"importance", {1, 2, 3}}};
  rep.events = {truncated_event(3)};
  store.add_repetition(c, rep);
  store.finish_case(c, CaseStatus::Complete);
  if (status != RunStatus::Running) store.finish_run(run, status);
  exec_sql(store, "UPDATE runs SET started_at = '" + started_at + "' WHERE id = " + std::to_string(run));
  return run;
}

ResultsStore::VerdictRecord verdict(std::int64_t baseline, std::int64_t candidate) {
  ResultsStore::VerdictRecord v;
  v.baseline_run = baseline;
  v.candidate_run = candidate;
  v.outcome = "pass";
  v.rules_json = v.rows_json = "{}";
  return v;
}

std::vector<std::int64_t> ids(const std::vector<RetentionRun>& runs) {
  std::vector<std::int64_t> out;
  for (const RetentionRun& r : runs) out.push_back(r.id);
  return out;
}

std::string why_kept(const PrunePlan& plan, std::int64_t id) {
  for (const KeptRun& k : plan.kept_old) {
    if (k.run.id == id) return k.why;
  }
  return "";
}

// The history every test below starts from (ids in order of creation):
//  1 nightly 01-01 complete     baseline nightly/main           stays
//  2 nightly 01-02 complete     acknowledged against run 1      stays
//  3 nightly 01-03 failed                                       goes
//  4 nightly 01-04 complete     verdict 1 -> 4, a change point  goes
//  5 nightly 01-05 interrupted  verdict 5 -> 6                  goes (6 is kept only as a baseline)
//  6 nightly 02-01 complete     baseline of run 9's verdict     stays
//  7 nightly 03-01 complete     the second newest complete      stays (keep 2)
//  8 smoke   01-10 complete     its suite's newest complete     stays (keep 2)
//  9 nightly 05-20 complete     newer than the cutoff           stays
// 10 nightly 01-06 running      this process, alive             stays
// 11 nightly 01-07 running      another boot: aborted           goes
void build_history(ResultsStore& store) {
  add_run(store, "nightly", "2026-01-01T02:00:00Z", RunStatus::Complete);
  add_run(store, "nightly", "2026-01-02T02:00:00Z", RunStatus::Complete);
  add_run(store, "nightly", "2026-01-03T02:00:00Z", RunStatus::Failed);
  add_run(store, "nightly", "2026-01-04T02:00:00Z", RunStatus::Complete);
  add_run(store, "nightly", "2026-01-05T02:00:00Z", RunStatus::Interrupted);
  add_run(store, "nightly", "2026-02-01T02:00:00Z", RunStatus::Complete);
  add_run(store, "nightly", "2026-03-01T02:00:00Z", RunStatus::Complete);
  add_run(store, "smoke", "2026-01-10T02:00:00Z", RunStatus::Complete);
  add_run(store, "nightly", "2026-05-20T02:00:00Z", RunStatus::Complete);
  add_run(store, "nightly", "2026-01-06T02:00:00Z", RunStatus::Running);
  const std::int64_t dead = add_run(store, "nightly", "2026-01-07T02:00:00Z", RunStatus::Running);
  exec_sql(store, "UPDATE runs SET boot_id = 'another-boot' WHERE id = " + std::to_string(dead));
  store.set_baseline("nightly/main", 1, "first night");
  store.add_verdict(verdict(1, 2));
  store.add_verdict(verdict(1, 4));
  store.add_verdict(verdict(5, 6));
  store.add_verdict(verdict(6, 9));
  store.add_ack(2, 1, "*", "token_drop_ratio", "a deliberate trade");
  store.replace_change_points("syn-7b/rag-2k/q4-hybrid/host", "ttft_ms", {{4, 10.0, 12.0, "step"}, {9, 12.0, 11.0, "step"}});
}

PruneOptions options(int days, int keep) {
  PruneOptions o;
  o.older_than_days = days;
  o.keep_per_suite = keep;
  o.now = kNow;
  return o;
}

// Rows that name a run, or a case, that is not there.
std::int64_t orphans(ResultsStore& store) {
  std::int64_t n = 0;
  for (const char* table : {"metrics", "series", "histograms", "events"}) {
    n += count(store, std::string("SELECT count(*) FROM ") + table + " WHERE case_id NOT IN (SELECT id FROM cases)");
  }
  n += count(store, "SELECT count(*) FROM cases WHERE run_id NOT IN (SELECT id FROM runs)");
  n += count(store, "SELECT count(*) FROM baselines WHERE run_id NOT IN (SELECT id FROM runs)");
  n += count(store, "SELECT count(*) FROM acks WHERE run_id NOT IN (SELECT id FROM runs) OR baseline_run NOT IN (SELECT id FROM runs)");
  n += count(store, "SELECT count(*) FROM verdicts WHERE baseline_run NOT IN (SELECT id FROM runs) OR candidate_run NOT IN (SELECT id FROM runs)");
  n += count(store, "SELECT count(*) FROM change_points WHERE run_id NOT IN (SELECT id FROM runs)");
  return n;
}

}  // namespace

TEST_CASE("prune plans old runs nothing holds, and says why each old run stays", "[prune]") {
  kvtest::TempDir dir("prune-plan");
  ResultsStore store(dir.path + "/results.sqlite");
  build_history(store);
  const RetentionInput input = read_retention_input(store);
  const PrunePlan plan = plan_prune(input, options(30, 2));
  CHECK(plan.cutoff == "2026-05-02T00:00:00Z");
  CHECK(ids(plan.remove) == std::vector<std::int64_t>{3, 4, 5, 11});
  CHECK(why_kept(plan, 1) == "baseline nightly/main, baseline of acknowledgement 1");
  CHECK(why_kept(plan, 2) == "acknowledgement 1");
  CHECK(why_kept(plan, 6) == "baseline of run 9's gate verdict");
  CHECK(why_kept(plan, 7) == "one of the newest 2 complete runs of its suite");
  CHECK(why_kept(plan, 8) == "one of the newest 2 complete runs of its suite");
  CHECK(why_kept(plan, 10) == "running");
  CHECK(why_kept(plan, 9).empty());  // not old: not listed
  CHECK(plan.kept_old.size() == 6);

  SECTION("keep 0: only what is held or new stays") {
    const PrunePlan none = plan_prune(input, options(30, 0));
    CHECK(ids(none.remove) == std::vector<std::int64_t>{3, 4, 5, 7, 8, 11});
    CHECK(why_kept(none, 6) == "baseline of run 9's gate verdict");
  }
  SECTION("a long enough keep holds every complete run") {
    const PrunePlan many = plan_prune(input, options(30, 100));
    CHECK(ids(many.remove) == std::vector<std::int64_t>{3, 11});
    CHECK(why_kept(many, 5) == "baseline of run 6's gate verdict");  // 6 now stays on its own account
  }
  SECTION("0 days: every run is old, the newest complete ones still stay") {
    const PrunePlan all = plan_prune(input, options(0, 1));
    CHECK(plan.cutoff < all.cutoff);
    CHECK(why_kept(all, 9) == "one of the newest 1 complete runs of its suite");
    CHECK(why_kept(all, 6) == "baseline of run 9's gate verdict");
    CHECK(ids(all.remove) == std::vector<std::int64_t>{3, 4, 5, 7, 11});
  }
  SECTION("more days than the history: nothing is old") {
    CHECK(plan_prune(input, options(100000, 0)).remove.empty());
  }
  SECTION("bad options are input errors") {
    CHECK_THROWS_AS(plan_prune(input, options(-1, 2)), kv::InputError);
    CHECK_THROWS_AS(plan_prune(input, options(30, -1)), kv::InputError);
    PruneOptions bad_now = options(30, 2);
    bad_now.now = "yesterday";
    CHECK_THROWS_AS(plan_prune(input, bad_now), kv::InputError);
  }
}

TEST_CASE("prune removes every row of the runs it removes, keeps the rest whole and reclaims the space", "[prune]") {
  kvtest::TempDir dir("prune-apply");
  const std::string path = dir.path + "/results.sqlite";
  ResultsStore store(path);
  build_history(store);
  const auto kept_metrics = count(store, "SELECT count(*) FROM metric_values WHERE run_id IN (1, 2, 6, 7, 8, 9, 10)");
  const PrunePlan plan = plan_prune(read_retention_input(store), options(30, 2));
  const PruneResult result = apply_prune(store, plan);
  CHECK(ids(result.removed) == std::vector<std::int64_t>{3, 4, 5, 11});
  CHECK(result.spared.empty());
  std::vector<std::int64_t> left;
  for (const RunRecord& r : list_runs(store)) left.push_back(r.id);
  CHECK(left == std::vector<std::int64_t>{1, 2, 6, 7, 8, 9, 10});
  CHECK(orphans(store) == 0);
  CHECK(count(store, "SELECT count(*) FROM pragma_foreign_key_check") == 0);
  // What stays is whole.
  CHECK(count(store, "SELECT count(*) FROM metric_values WHERE run_id IN (1, 2, 6, 7, 8, 9, 10)") == kept_metrics);
  CHECK(count(store, "SELECT count(*) FROM verdicts") == 2);  // 1 -> 2 and 6 -> 9
  CHECK(count(store, "SELECT count(*) FROM verdicts WHERE baseline_run = 6 AND candidate_run = 9") == 1);
  CHECK(count(store, "SELECT count(*) FROM acks") == 1);
  CHECK(count(store, "SELECT count(*) FROM baselines WHERE run_id = 1") == 1);
  CHECK(count(store, "SELECT count(*) FROM change_points") == 1);
  // Counted per table: one case per run, two metrics, 4,000 series steps, three bins, one event.
  const std::vector<std::pair<std::string, std::int64_t>> rows = {{"metrics", 8},  {"series", 16000}, {"histograms", 12}, {"events", 4}, {"cases", 4},
                                                                   {"verdicts", 2}, {"change_points", 1}, {"runs", 4}};
  CHECK(result.rows_removed == rows);
  CHECK(result.vacuum_error.empty());
  CHECK(result.bytes_after < result.bytes_before);
  CHECK(result.bytes_after == database_file_bytes(path));
  // Nothing left to remove: a second prune removes nothing.
  const PruneResult again = apply_prune(store, plan_prune(read_retention_input(store), options(30, 2)));
  CHECK(again.removed.empty());
}

TEST_CASE("a run held after the plan was made is spared", "[prune]") {
  kvtest::TempDir dir("prune-stale");
  ResultsStore store(dir.path + "/results.sqlite");
  build_history(store);
  const PrunePlan plan = plan_prune(read_retention_input(store), options(30, 2));
  store.set_baseline("late", 3, "set after the plan");
  store.add_ack(4, 1, "*", "ttft_ms", "acknowledged after the plan");
  const PruneResult result = apply_prune(store, plan);
  CHECK(ids(result.removed) == std::vector<std::int64_t>{5, 11});
  CHECK(ids(result.spared) == std::vector<std::int64_t>{3, 4});
  CHECK(count(store, "SELECT count(*) FROM runs WHERE id IN (3, 4)") == 2);
  CHECK(count(store, "SELECT count(*) FROM metric_values WHERE run_id IN (3, 4)") == 4);
  CHECK(orphans(store) == 0);
}
