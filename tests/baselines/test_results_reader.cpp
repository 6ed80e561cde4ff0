// The typed reader over a store written through its API: runs and their filters, selectors,
// samples, series, events, baselines and verdicts; an older database reads as empty tables.
#include <catch2/catch.hpp>

#include "results_reader.h"
#include "runtime/error.h"
#include "test_support.h"

using namespace kvbench;

namespace {

RunInfo run_info(const std::string& suite, const std::vector<std::string>& tags) {
  RunInfo r;
  r.git_sha = "abc";
  r.config_json = "{}";
  r.config_hash = "h";
  r.tags = tags;
  r.meta_json = R"({"suite": ")" + suite + R"("})";
  return r;
}

}  // namespace

TEST_CASE("the reader filters runs, resolves selectors and returns samples, series and events", "[store][reader]") {
  kvtest::TempDir dir("reader");
  const std::string path = dir.path + "/r.sqlite";
  ResultsStore store(path);
  std::int64_t ids[3];
  for (int i = 0; i < 3; ++i) {
    ids[i] = store.begin_run(run_info(i == 2 ? "other" : "nightly", {i == 0 ? "a" : "b"}));
    const std::int64_t c = store.add_case(ids[i], {"m", "w", "p", "host", ""});
    RepetitionRecord rec;
    rec.repetition = 1;
    rec.metrics = {{1, "tpot_ms_p50", 10.0 + i, "", "ms", Clock::Host, false, i == 1},
                   {1, "ppl", std::nullopt, "synthetic backend", "ppl", Clock::Exact, false, false}};
    rec.series = {{"tpot_ms", {1.0, 2.0, 3.0}}};
    kv::MemoryEvent pressure;
    pressure.step = 4;
    pressure.to = kv::PressureLevel::Warning;
    pressure.reason = "L1 free at or below the warning watermark";
    rec.events = {memory_event(pressure)};
    store.add_repetition(c, rec);
    store.finish_case(c, CaseStatus::Complete);
    store.finish_run(ids[i], RunStatus::Complete);
  }
  RunFilter filter;
  filter.suite = "nightly";
  CHECK(list_runs(store, filter).size() == 2);
  filter.tags = {"b"};
  CHECK(list_runs(store, filter).size() == 1);
  RunFilter late;
  late.since = "2999-01-01T00:00:00Z";
  CHECK(list_runs(store, late).empty());
  CHECK(resolve_run(store, "latest", "--x") == ids[2]);
  CHECK(resolve_run(store, "latest:a", "--x") == ids[0]);
  CHECK(resolve_run(store, "latest:suite=nightly", "--x") == ids[1]);
  CHECK_THROWS_WITH(resolve_run(store, "latest:zzz", "--x"), Catch::Contains("no complete run matches"));
  CHECK_THROWS_WITH(resolve_run(store, "0", "--x"), Catch::Contains("not a run id"));
  store.set_baseline("ref", ids[0], "first");
  store.set_baseline("ref", ids[1], "moved");  // a name is replaced, not duplicated
  CHECK(resolve_run(store, "ref", "--x") == ids[1]);
  REQUIRE(list_baselines(store).size() == 1);
  CHECK(list_baselines(store)[0].reason == "moved");

  const auto samples = load_samples(store, ids[1]);
  REQUIRE(samples.size() == 1);
  REQUIRE(samples[0].samples.at("tpot_ms_p50").size() == 1);
  CHECK(samples[0].samples.at("tpot_ms_p50")[0].value == 11.0);
  CHECK(samples[0].samples.at("tpot_ms_p50")[0].noisy);
  CHECK(samples[0].na_reason.at("ppl") == "synthetic backend");
  CHECK(load_series(store, ids[1], "m/w/p/host", 1).at("tpot_ms") == std::vector<double>{1.0, 2.0, 3.0});
  const auto events = load_events(store, ids[1], "m/w/p/host", 1);
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == EventKind::Pressure);
  CHECK(events[0].step == 4);
  CHECK(events[0].to == kv::PressureLevel::Warning);
  CHECK(events[0].reason == "L1 free at or below the warning watermark");

  ResultsStore::VerdictRecord v;
  v.baseline_run = ids[0];
  v.candidate_run = ids[1];
  v.outcome = "fail";
  v.regressed = 2;
  v.rules_json = v.rows_json = "{}";
  store.add_verdict(v);
  REQUIRE(list_verdicts(store, ids[1]).size() == 1);
  CHECK(list_verdicts(store, ids[1])[0].regressed == 2);
  CHECK(list_verdicts(store, ids[0]).empty());
  CHECK(list_acks(store).empty());
  CHECK(list_change_points(store).empty());
}

TEST_CASE("a version-3 database reads with no baselines and no verdicts", "[store][reader]") {
  kvtest::TempDir dir("reader-v3");
  const std::string path = dir.path + "/v3.sqlite";
  ResultsStore::create_at_version(path, 3);
  ResultsStore store(path, Access::ReadOnly);
  CHECK(store.schema_version() == 3);
  CHECK(list_baselines(store).empty());
  CHECK(list_verdicts(store).empty());
  CHECK(list_runs(store).empty());
  CHECK_THROWS_WITH(resolve_run(store, "nightly-ref", "--baseline"), Catch::Contains("nor a baseline name"));
}
