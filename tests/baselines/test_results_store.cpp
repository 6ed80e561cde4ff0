#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "results_store.h"
#include "runtime/error.h"
#include "test_support.h"

using namespace kvbench;

namespace {

RunInfo info(const std::string& tag) {
  RunInfo r;
  r.git_sha = "abc123";
  r.config_json = "{}";
  r.config_hash = "h";
  r.tags = {tag, "nightly"};
  r.meta_json = "{}";
  return r;
}

std::vector<MetricRecord> metrics(int repetition) {
  MetricRecord ttft{repetition, "ttft_ms", 12.5, "", "ms", Clock::Host, true, false};
  MetricRecord drop{repetition, "token_drop_ratio", 0.9, "", "ratio", Clock::Exact, false, false};
  MetricRecord swap{repetition, "prefetch_hit_rate", std::nullopt, "no offload", "ratio", Clock::Exact, false, false};
  return {ttft, drop, swap};
}

std::int64_t count(ResultsStore& store, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(store.db(), sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
  const std::int64_t n = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return n;
}

}  // namespace

TEST_CASE("a run's metrics read back through metric_values", "[store]") {
  kvtest::TempDir dir("store-roundtrip");
  const std::string path = dir.path + "/results.sqlite";
  std::int64_t run = 0;
  {
    ResultsStore store(path);
    run = store.begin_run(info("t1"));
    const std::int64_t c = store.add_case(run, {"syn-7b", "rag-16k", "q4-hybrid", "host", ""});
    store.add_metrics(c, metrics(1));
    store.add_metrics(c, metrics(2));
    store.add_series(c, 1, "l1_used_bytes", {1.0, 2.0, 3.0});
    store.add_event(c, 1, 7, "pressure", "safe->warning");
    store.finish_run(run, RunStatus::Complete);
  }
  ResultsStore store(path);  // reopened
  const auto runs = store.runs();
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].status == RunStatus::Complete);
  CHECK(runs[0].tags == std::vector<std::string>{"t1", "nightly"});
  CHECK(count(store, "SELECT count(*) FROM metric_values WHERE case_name = 'syn-7b/rag-16k/q4-hybrid/host'") == 6);
  CHECK(count(store, "SELECT count(*) FROM metric_values WHERE value IS NULL AND na_reason = 'no offload'") == 2);
  CHECK(count(store, "SELECT count(*) FROM metric_values WHERE name = 'ttft_ms' AND clock = 'host' AND extrapolated = 1") == 2);
  CHECK(count(store, "SELECT min(repetition) FROM metric_values") == 1);
  CHECK(count(store, "SELECT count(*) FROM series") == 3);
  CHECK(count(store, "SELECT count(*) FROM metric_values WHERE run_status = 'complete'") == 6);
  // A missing value without a reason, or repetition 0, is refused and writes nothing.
  const std::int64_t c2 = store.add_case(store.begin_run(info("t2")), {"m", "w", "p", "host", ""});
  MetricRecord bad{1, "x", std::nullopt, "", "ms", Clock::Host, false, false};
  CHECK_THROWS(store.add_metrics(c2, {metrics(1)[0], bad}));
  CHECK(count(store, "SELECT count(*) FROM metrics WHERE case_id = " + std::to_string(c2)) == 0);
}

TEST_CASE("a run whose process is gone is marked aborted when the store opens", "[store]") {
  kvtest::TempDir dir("store-aborted");
  const std::string path = dir.path + "/results.sqlite";
  {
    ResultsStore store(path);
    store.finish_run(store.begin_run(info("done")), RunStatus::Complete);
  }
  // A child process begins a run and dies without finishing it (SIGKILL).
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ResultsStore store(path);
    store.begin_run(info("killed"));
    ::kill(::getpid(), SIGKILL);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  ResultsStore store(path);
  const auto runs = store.runs();
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].status == RunStatus::Complete);
  CHECK(runs[1].status == RunStatus::Aborted);
  // Our own running run is left alone.
  const std::int64_t mine = store.begin_run(info("live"));
  CHECK(store.mark_abandoned_runs() == 0);
  store.finish_run(mine, RunStatus::Complete);
}

TEST_CASE("two writers into one database both complete", "[store]") {
  kvtest::TempDir dir("store-concurrent");
  const std::string path = dir.path + "/results.sqlite";
  { ResultsStore create(path); }
  const auto writer = [&](const std::string& tag) {
    ResultsStore store(path);
    const std::int64_t run = store.begin_run(info(tag));
    for (int c = 0; c < 20; ++c) {
      const std::int64_t id = store.add_case(run, {"m", "w" + std::to_string(c), "p", "host", ""});
      for (int r = 1; r <= 3; ++r) store.add_metrics(id, metrics(r));
    }
    store.finish_run(run, RunStatus::Complete);
  };
  std::thread a(writer, "a"), b(writer, "b");
  a.join();
  b.join();
  ResultsStore store(path);
  const auto runs = store.runs();
  REQUIRE(runs.size() == 2);
  for (const RunRow& run : runs) CHECK(run.status == RunStatus::Complete);
  CHECK(count(store, "SELECT count(*) FROM metric_values") == 2 * 20 * 3 * 3);
}

TEST_CASE("a database from a newer schema, or not ours, is refused naming the file", "[store]") {
  kvtest::TempDir dir("store-schema");
  const std::string newer = dir.path + "/newer.sqlite";
  {
    ResultsStore store(newer);
    sqlite3_exec(store.db(), "PRAGMA user_version = 99", nullptr, nullptr, nullptr);
  }
  CHECK_THROWS_MATCHES(ResultsStore(newer), kv::InputError, Catch::Predicate<kv::InputError>([&](const kv::InputError& e) {
                         return e.where() == newer && e.field() == "schema_version" &&
                                e.reason().find("schema version 99") != std::string::npos;
                       }));
  const std::string foreign = dir.path + "/foreign.sqlite";
  {
    sqlite3* db = nullptr;
    sqlite3_open(foreign.c_str(), &db);
    sqlite3_exec(db, "CREATE TABLE t (x)", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  CHECK_THROWS_WITH(ResultsStore(foreign), Catch::Contains("not a kvbench database"));
  const std::string text = dir.path + "/text.sqlite";
  std::ofstream(text) << "this is not sqlite at all, just some text long enough to have a header";
  CHECK_THROWS_AS(ResultsStore(text), kv::InputError);
  CHECK_THROWS_AS(ResultsStore(dir.path + "/missing-dir/results.sqlite"), kv::InputError);
}
