// Which cases a shard runs (shard_selection.h): whole groups, balanced by the previous run's case
// times where a database holds them (estimates scaled to them where it does not), else by each
// case's positions; and the case times read from the newest complete run that is not a shard.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "results_store.h"
#include "shard_selection.h"
#include "test_support.h"

using namespace kvbench;

namespace {

// Groups of one case each (host only), with the given positions.
struct Suite {
  std::vector<PlannedCase> plan;
  std::vector<PreparedCase> cases;
  std::vector<std::pair<std::size_t, std::size_t>> groups;
  WorkPlan work;
};

Suite suite_of(const std::vector<int>& positions) {
  Suite s;
  for (std::size_t i = 0; i < positions.size(); ++i) {
    PlannedCase p;
    p.info = CaseInfo{"m", fmt::format("w{}", i), "p", "host", ""};
    p.workload_index = i;
    s.plan.push_back(p);
    PreparedCase c;
    c.info = p.info;
    c.script.script.positions = positions[i];
    s.cases.push_back(std::move(c));
    s.groups.emplace_back(i, i + 1);
    s.work.host_work.push_back(positions[i] * 4.0);  // plan_work's estimate: 3 repetitions and a warmup
    s.work.own_work.push_back(0.0);
  }
  s.work.expected_rerun.assign(positions.size(), 0);
  return s;
}

std::set<std::size_t> all_groups(const Suite& s, int count, const CaseTimes& history) {
  std::set<std::size_t> seen;
  for (int i = 1; i <= count; ++i) {
    const ShardSelection part = select_shard({i, count}, s.plan, s.cases, s.groups, s.work, 3, 1, history);
    for (std::size_t g : part.groups) CHECK(seen.insert(g).second);  // no group in two shards
  }
  return seen;
}

}  // namespace

TEST_CASE("shards take disjoint groups that make the suite, with one plan hash", "[shard]") {
  const Suite s = suite_of({1000, 8000, 2000, 4000, 500, 3000, 6000});
  for (int count : {1, 2, 3, 7, 9}) {
    INFO("count " << count);
    CHECK(all_groups(s, count, {}).size() == s.groups.size());
    const std::string hash = select_shard({1, count}, s.plan, s.cases, s.groups, s.work, 3, 1, {}).plan_hash;
    CHECK(select_shard({count, count}, s.plan, s.cases, s.groups, s.work, 3, 1, {}).plan_hash == hash);
  }
  const ShardSelection first = select_shard({1, 2}, s.plan, s.cases, s.groups, s.work, 3, 1, {});
  CHECK(first.balanced_by.find("estimate") != std::string::npos);
  REQUIRE(first.shard_weights.size() == 2);
  // 24.5K positions x 4 engine runs, split within the heaviest group (8000 x 4).
  CHECK(first.shard_weights[0] + first.shard_weights[1] == Approx(24500.0 * 4));
  CHECK(std::abs(first.shard_weights[0] - first.shard_weights[1]) <= 8000.0 * 4);
}

TEST_CASE("the previous run's case times balance the shards, and groups it did not time are estimated at its rate", "[shard]") {
  // Positions say w1 is the heaviest; the history says w0 took far longer.
  const Suite s = suite_of({1000, 8000, 1000, 1000});
  CaseTimes history;
  history.source = "run 7 of history.sqlite";
  history.seconds = {{"m/w0/p/host", 40.0}, {"m/w1/p/host", 2.0}, {"m/w2/p/host", 1.0}, {"m/w3/p/host", 1.0}};
  const ShardSelection one = select_shard({1, 2}, s.plan, s.cases, s.groups, s.work, 3, 1, history);
  CHECK(one.balanced_by == "the case times of run 7 of history.sqlite");
  CHECK(one.groups == std::vector<std::size_t>{0});  // w0 alone: 160 s against 16 s
  CHECK(one.shard_weights[0] == Approx(160.0));
  CHECK(one.shard_weights[1] == Approx(16.0));
  // w3 untimed: estimated at the timed groups' rate (172 s for 4 x 10000 positions).
  history.seconds.erase("m/w3/p/host");
  const ShardSelection partial = select_shard({2, 2}, s.plan, s.cases, s.groups, s.work, 3, 1, history);
  CHECK(partial.balanced_by.find("3 of 4 groups timed, the rest estimated") != std::string::npos);
  CHECK(partial.shard_weights[1] == Approx(12.0 + 1000.0 * 4 * (172.0 / 40000.0)));
}

TEST_CASE("case times come from the newest complete run of the suite that is not a shard", "[shard]") {
  const kvtest::TempDir dir("kvbench-shard-times");
  const std::string db = dir.path + "/r.sqlite";
  CHECK(previous_case_times(db, "nightly").seconds.empty());  // no file: no history
  {
    ResultsStore store(db);
    const auto add_run = [&](const std::string& meta, double wall_ms, RunStatus status) {
      RunInfo info;
      info.meta_json = meta;
      const std::int64_t run = store.begin_run(info);
      const std::int64_t c = store.add_case(run, CaseInfo{"m", "w", "p", "host", ""});
      for (int r = 1; r <= 3; ++r) {
        // The median of the three: 2 x wall_ms.
        store.add_metrics(c, {MetricRecord{r, "case_wall_ms", wall_ms * r, "", "ms", Clock::Host, false, false}});
      }
      store.finish_case(c, CaseStatus::Complete);
      store.finish_run(run, status);
    };
    add_run(R"({"suite": "nightly"})", 1000.0, RunStatus::Complete);
    add_run(R"({"suite": "nightly"})", 3000.0, RunStatus::Complete);
    add_run(R"({"suite": "nightly"})", 9000.0, RunStatus::Failed);
    add_run(R"({"suite": "nightly", "shard": {"index": 1, "count": 2}})", 7000.0, RunStatus::Complete);
    add_run(R"({"suite": "smoke"})", 5000.0, RunStatus::Complete);
  }
  const CaseTimes times = previous_case_times(db, "nightly");
  CHECK(times.source == "run 2 of " + db);
  REQUIRE(times.seconds.count("m/w/p/host") == 1);
  CHECK(times.seconds.at("m/w/p/host") == Approx(6.0));
  CHECK(previous_case_times(db, "other").seconds.empty());
}
