#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "results_reader.h"
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
    kv::MemoryEvent pressure;
    pressure.step = 7;
    pressure.to = kv::PressureLevel::Warning;
    pressure.l1_capacity_bytes = 1024;
    store.add_events(c, 1, {memory_event(pressure)});
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
  // An event is stored as its fields, with a line for people beside them.
  CHECK(count(store, "SELECT count(*) FROM events WHERE kind = 'pressure' AND json_extract(data, '$.to') = 'warning'"
                     " AND json_extract(data, '$.l1_capacity_bytes') = 1024 AND detail = 'safe->warning l1_used=0/1024 '") == 1);
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

namespace {

// A copy of the schema-v2 database written by the v2 binary (tests/data/README.md).
std::string copy_v2_fixture(const kvtest::TempDir& dir) {
  const std::string path = dir.path + "/results-v2.sqlite";
  std::filesystem::copy_file(std::string(KVBENCH_SOURCE_DIR) + "/tests/data/results-v2.sqlite", path);
  return path;
}

}  // namespace

TEST_CASE("the schema-v2 database of the v2 binary migrates in place with its runs intact", "[store]") {
  kvtest::TempDir dir("store-v2");
  const std::string path = copy_v2_fixture(dir);
  std::int64_t metrics_before = 0;
  {
    ResultsStore old(path, Access::ReadOnly);  // readers take v2 as it is
    CHECK(old.schema_version() == 2);
    metrics_before = count(old, "SELECT count(*) FROM metric_values");
    REQUIRE(metrics_before > 100);
  }
  ResultsStore store(path);
  CHECK(store.schema_version() == kSchemaVersion);
  CHECK(count(store, "PRAGMA user_version") == kSchemaVersion);
  CHECK(count(store, "SELECT count(*) FROM metric_values") == metrics_before);
  CHECK(count(store, "SELECT count(*) FROM cases") == 3);
  CHECK(count(store, "SELECT count(*) FROM runs WHERE status = 'complete'") == 2);
  CHECK(count(store, "SELECT count(*) FROM runs WHERE tags = 'fixture,second'") == 1);
  CHECK(count(store, "SELECT count(*) FROM pragma_foreign_key_check") == 0);
  // The new status is accepted, and cases still cascade with their run.
  const std::int64_t id = store.begin_run(info("v3"));
  store.finish_run(id, RunStatus::Interrupted);
  CHECK(store.runs().back().status == RunStatus::Interrupted);
  const std::int64_t c = store.add_case(id, {"m", "w", "p", "host", ""});
  store.add_metrics(c, metrics(1));
  REQUIRE(sqlite3_exec(store.db(), ("DELETE FROM runs WHERE id = " + std::to_string(id)).c_str(), nullptr, nullptr, nullptr) ==
          SQLITE_OK);
  CHECK(count(store, "SELECT count(*) FROM cases WHERE run_id = " + std::to_string(id)) == 0);
  CHECK(count(store, "SELECT count(*) FROM metric_values") == metrics_before);
  CHECK(count(store, "PRAGMA integrity_check") == 0);  // "ok" reads as 0
}

TEST_CASE("a repetition is stored whole in one transaction", "[store]") {
  kvtest::TempDir dir("store-repetition");
  ResultsStore store(dir.path + "/r.sqlite");
  const std::int64_t run = store.begin_run(info("rep"));
  const std::int64_t c = store.add_case(run, {"m", "w", "p", "host", ""});
  RepetitionRecord record;
  record.repetition = 1;
  record.metrics = metrics(1);
  record.series = {{"tpot_ms", {1.0, 2.0}}};
  record.histograms = {{"bits", {3, 4, 5}}};
  record.events = {truncated_event(3)};
  store.add_repetition(c, record);
  CHECK(count(store, "SELECT count(*) FROM metrics") == 3);
  CHECK(count(store, "SELECT count(*) FROM series") == 2);
  // A bad record in the middle rolls back everything of its repetition.
  RepetitionRecord bad = record;
  bad.repetition = 2;
  for (MetricRecord& m : bad.metrics) m.repetition = 2;
  bad.events.push_back(note_event(EventKind::DoesNotFit, "y"));
  bad.histograms.push_back({"bits", {1}});  // duplicate (case, repetition, name, bin)
  CHECK_THROWS(store.add_repetition(c, bad));
  CHECK(count(store, "SELECT count(*) FROM metrics WHERE repetition = 2") == 0);
  CHECK(count(store, "SELECT count(*) FROM series WHERE repetition = 2") == 0);
  CHECK(count(store, "SELECT count(*) FROM events WHERE repetition = 2") == 0);
}

TEST_CASE("a read-only store never writes and refuses files with no kvbench schema", "[store]") {
  kvtest::TempDir dir("store-readonly");
  const std::string missing = dir.path + "/missing.sqlite";
  CHECK_THROWS_WITH(ResultsStore(missing, Access::ReadOnly), Catch::Contains("no such database"));
  CHECK_FALSE(std::filesystem::exists(missing));

  const std::string empty = dir.path + "/empty.sqlite";
  std::ofstream(empty).close();
  CHECK_THROWS_WITH(ResultsStore(empty, Access::ReadOnly), Catch::Contains("not a kvbench database"));
  CHECK(std::filesystem::file_size(empty) == 0);

  const std::string foreign = dir.path + "/foreign.sqlite";
  {
    sqlite3* db = nullptr;
    sqlite3_open(foreign.c_str(), &db);
    sqlite3_exec(db, "CREATE TABLE t (x)", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  const std::string before = kvtest::file_bytes(foreign);
  CHECK_THROWS_WITH(ResultsStore(foreign, Access::ReadOnly), Catch::Contains("not a kvbench database"));
  CHECK(kvtest::file_bytes(foreign) == before);

  // A running run whose process is gone reads as aborted, and stays `running` in the file.
  const std::string path = dir.path + "/r.sqlite";
  {
    ResultsStore store(path);
    store.begin_run(info("dead"));
    REQUIRE(sqlite3_exec(store.db(), "UPDATE runs SET pid = 999999999", nullptr, nullptr, nullptr) == SQLITE_OK);
  }
  const std::string bytes = kvtest::file_bytes(path);
  {
    ResultsStore reader(path, Access::ReadOnly);
    REQUIRE(reader.runs().size() == 1);
    CHECK(reader.runs()[0].status == RunStatus::Aborted);
    CHECK(count(reader, "SELECT count(*) FROM runs WHERE status = 'running'") == 1);
  }
  CHECK(kvtest::file_bytes(path) == bytes);
}

TEST_CASE("a read-only store opens a 0444 file and a database in a read-only directory", "[store]") {
  kvtest::TempDir dir("store-readonly-perm");
  std::filesystem::permissions(dir.path, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                             std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                             std::filesystem::perms::others_exec);
  const std::string path = copy_v2_fixture(dir);
  { ResultsStore migrate(path); }
  std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::group_read |
                                         std::filesystem::perms::others_read);
  const std::string bytes = kvtest::file_bytes(path);
  // The child has no write permission on the file nor on the directory: the writer fails with
  // a clear error, the reader reads.
  const auto read_runs = [&] {
    ResultsStore reader(path, Access::ReadOnly);
    return reader.runs().size() == 2 ? 0 : 1;
  };
  const auto write = [&] {
    try {
      ResultsStore writer(path);
      writer.begin_run(info("x"));
    } catch (const kv::InputError& e) {
      return std::string(e.what()).find("cannot write") != std::string::npos ? 0 : 2;
    }
    return 1;
  };
  CHECK(kvtest::run_unprivileged(read_runs) == 0);
  CHECK(kvtest::run_unprivileged(write) == 0);
  std::filesystem::permissions(dir.path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec |
                                             std::filesystem::perms::others_read | std::filesystem::perms::others_exec);
  CHECK(kvtest::run_unprivileged(read_runs) == 0);
  std::filesystem::permissions(dir.path, std::filesystem::perms::owner_all);
  CHECK(kvtest::file_bytes(path) == bytes);
}

TEST_CASE("every earlier schema version migrates to the current one", "[store]") {
  kvtest::TempDir dir("store-versions");
  for (int version = 1; version < kSchemaVersion; ++version) {
    INFO("from version " << version);
    const std::string path = dir.path + "/v" + std::to_string(version) + ".sqlite";
    ResultsStore::create_at_version(path, version);
    {
      sqlite3* db = nullptr;
      REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
      // A run with a case and a metric, as that version stores them.
      REQUIRE(sqlite3_exec(db,
                           "INSERT INTO runs (started_at, status, pid, boot_id, heartbeat_at, git_sha, git_dirty, config_json,"
                           " config_hash, tags, meta_json) VALUES ('t', 'complete', 1, 'b', 't', 'g', 0, '{}', 'h', 'x', '{}');"
                           "INSERT INTO cases (run_id, name, model, workload, policy, soc) VALUES (1, 'm/w/p/s', 'm', 'w', 'p', 's');"
                           "INSERT INTO metrics (case_id, repetition, name, value, unit, clock, extrapolated, noisy)"
                           " VALUES (1, 1, 'ttft_ms', 2.5, 'ms', 'host', 0, 0);",
                           nullptr, nullptr, nullptr) == SQLITE_OK);
      sqlite3_close(db);
    }
    ResultsStore store(path);
    CHECK(store.schema_version() == kSchemaVersion);
    CHECK(count(store, "SELECT count(*) FROM metric_values WHERE name = 'ttft_ms' AND value = 2.5 AND run_status = 'complete'") == 1);
    CHECK(count(store, "SELECT count(*) FROM cases WHERE status = 'complete'") == 1);
    CHECK(count(store, "SELECT count(*) FROM baselines") == 0);
    CHECK(count(store, "SELECT count(*) FROM pragma_foreign_key_check") == 0);
    const std::int64_t id = store.begin_run(info("new"));
    store.finish_run(id, RunStatus::Interrupted);
    CHECK(count(store, "SELECT count(*) FROM runs WHERE status = 'interrupted'") == 1);
  }
}

TEST_CASE("a version-4 database migrates in place and one name then holds both clocks", "[store]") {
  kvtest::TempDir dir("store-clocks");
  const std::string path = dir.path + "/v4.sqlite";
  ResultsStore::create_at_version(path, 4);
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db,
                         "INSERT INTO runs (started_at, status, pid, boot_id, heartbeat_at, git_sha, git_dirty, config_json,"
                         " config_hash, tags, meta_json) VALUES ('t', 'complete', 1, 'b', 't', 'g', 0, '{}', 'h', 'x', '{}');"
                         "INSERT INTO cases (run_id, name, model, workload, policy, soc) VALUES (1, 'm/w/p/host', 'm', 'w', 'p', 'host');"
                         "INSERT INTO metrics (case_id, repetition, name, value, unit, clock, extrapolated, noisy)"
                         " VALUES (1, 1, 'tpot_ms_p50', 2.5, 'ms', 'host', 0, 0);",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    // Version 4 keys a metric by name alone: the modelled twin cannot be stored there.
    CHECK(sqlite3_exec(db,
                       "INSERT INTO metrics (case_id, repetition, name, value, unit, clock, extrapolated, noisy)"
                       " VALUES (1, 1, 'tpot_ms_p50', 3.0, 'ms', 'model', 0, 0);",
                       nullptr, nullptr, nullptr) != SQLITE_OK);
    sqlite3_close(db);
  }
  ResultsStore store(path);
  CHECK(store.schema_version() == kSchemaVersion);
  const std::int64_t c = store.add_case(1, {"m", "w2", "p", "host", ""});
  RepetitionRecord record;
  record.repetition = 1;
  MetricRecord host;
  host.name = "tpot_ms_p50";
  host.value = 4.0;
  host.unit = "ms";
  host.clock = Clock::Host;
  MetricRecord model = host;
  model.value = 5.0;
  model.clock = Clock::Model;
  record.metrics = {host, model};
  store.add_repetition(c, record);
  const std::vector<CaseSamples> cases = load_samples(store, 1);
  REQUIRE(cases.size() == 2);
  CHECK(cases[0].samples.at("tpot_ms_p50").at(0).value == 2.5);  // the migrated row
  CHECK(cases[0].samples.count("tpot_ms_p50@model") == 0);
  CHECK(cases[1].samples.at("tpot_ms_p50").at(0).value == 4.0);
  CHECK(cases[1].samples.at("tpot_ms_p50@model").at(0).value == 5.0);
  CHECK(count(store, "SELECT count(*) FROM metric_values WHERE name = 'tpot_ms_p50'") == 3);
}

TEST_CASE("a version-5 database keeps its verdicts and then stores unreliable and definition-changed outcomes", "[store][definition]") {
  kvtest::TempDir dir("store-outcomes");
  const std::string path = dir.path + "/v5.sqlite";
  ResultsStore::create_at_version(path, 5);
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db,
                         "INSERT INTO runs (started_at, status, pid, boot_id, heartbeat_at, git_sha, git_dirty, config_json,"
                         " config_hash, tags, meta_json) VALUES ('t', 'complete', 1, 'b', 't', 'g', 0, '{}', 'h', 'x', '{}');"
                         "INSERT INTO verdicts (id, created_at, baseline_run, candidate_run, outcome, regressed, improved, inconclusive,"
                         " rules_json, rows_json) VALUES (7, 't', 1, 1, 'fail', 2, 0, 0, '{}', '{}');",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    // Version 5 admits three outcomes only.
    CHECK(sqlite3_exec(db,
                       "INSERT INTO verdicts (created_at, baseline_run, candidate_run, outcome, regressed, improved, inconclusive,"
                       " rules_json, rows_json) VALUES ('t', 1, 1, 'definition-changed', 0, 0, 0, '{}', '{}');",
                       nullptr, nullptr, nullptr) != SQLITE_OK);
    sqlite3_close(db);
  }
  ResultsStore store(path);
  CHECK(store.schema_version() == kSchemaVersion);
  CHECK(count(store, "SELECT count(*) FROM verdicts WHERE id = 7 AND outcome = 'fail' AND regressed = 2") == 1);
  ResultsStore::VerdictRecord verdict;
  verdict.baseline_run = verdict.candidate_run = 1;
  for (const char* outcome : {"unreliable", "definition-changed"}) {
    verdict.outcome = outcome;
    store.add_verdict(verdict);
  }
  verdict.outcome = "maybe";
  CHECK_THROWS(store.add_verdict(verdict));
  CHECK(count(store, "SELECT count(*) FROM verdicts") == 3);
  CHECK(count(store, "SELECT count(*) FROM pragma_foreign_key_check") == 0);
}
