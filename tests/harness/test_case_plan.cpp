// The case plan (case_plan.h): which cases a suite's run takes and in what order, with nothing
// loaded or run.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "case_plan.h"
#include "runtime/error.h"
#include "suite_config.h"

using namespace kvbench;

namespace {

// Two models; the second workload and the second policy run on one model each.
SuiteConfig two_by_two() {
  return parse_suite(R"({
    "name": "plan", "seed": 1, "repetitions": 1, "warmup": 0,
    "models":    [{"name": "a", "backend": "synthetic", "preset": "llama-7b-gqa", "sample_layers": 1},
                  {"name": "b", "backend": "synthetic", "preset": "llama-7b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag", "kind": "rag", "context_tokens": 1024, "gen_tokens": 8},
                  {"name": "code", "kind": "codebase", "context_tokens": 2048, "gen_tokens": 8, "models": ["b"]}],
    "policies":  [{"name": "f16", "k": "f16", "v": "f16"},
                  {"name": "q4", "k": "q4", "v": "q4", "models": ["a"]}],
    "socs": ["host", "raspberry-pi-5"]
  })",
                     "plan.json", ".");
}

std::vector<std::string> names(const std::vector<PlannedCase>& cases) {
  std::vector<std::string> out;
  for (const PlannedCase& c : cases) out.push_back(c.info.name());
  return out;
}

}  // namespace

TEST_CASE("a plan takes models x workloads x policies x socs in order, less what models lists leave out", "[config]") {
  const SuiteConfig suite = two_by_two();
  const std::vector<PlannedCase> cases = plan_cases(suite, "");
  const std::vector<std::string> want = {
      "a/rag/f16/host", "a/rag/f16/raspberry-pi-5", "a/rag/q4/host",    "a/rag/q4/raspberry-pi-5",
      "b/rag/f16/host", "b/rag/f16/raspberry-pi-5", "b/code/f16/host", "b/code/f16/raspberry-pi-5",
  };
  CHECK(names(cases) == want);
  // The indices name the suite's entries the names come from.
  for (const PlannedCase& c : cases) {
    CHECK(suite.models[c.model_index].name == c.info.model);
    CHECK(suite.workloads[c.workload_index].name == c.info.workload);
    CHECK(suite.policies[c.policy_index].name == c.info.policy);
    CHECK(c.info.skipped_reason.empty());
  }
}

TEST_CASE("a plan's filter is a regular expression searched in the case name", "[config]") {
  const SuiteConfig suite = two_by_two();
  CHECK(names(plan_cases(suite, "/q4/")) == std::vector<std::string>{"a/rag/q4/host", "a/rag/q4/raspberry-pi-5"});
  CHECK(names(plan_cases(suite, "^b/.*host$")) == std::vector<std::string>{"b/rag/f16/host", "b/code/f16/host"});
}

TEST_CASE("a filter that is no regular expression, or keeps no case, is refused naming --filter", "[config]") {
  const SuiteConfig suite = two_by_two();
  const auto refused = [&](const std::string& filter, const std::string& reason) {
    try {
      plan_cases(suite, filter);
      FAIL("no error for filter " << filter);
    } catch (const kv::InputError& e) {
      CHECK(e.where() == "--filter");
      CHECK(e.field() == filter);
      CHECK_THAT(e.reason(), Catch::Contains(reason));
    }
  };
  refused("(", "not a regular expression");
  refused("c/code/", "matches no case of suite 'plan'");
  refused("a/code", "matches no case of suite 'plan'");  // code runs on b only
}

TEST_CASE("cases that differ only in their SoC form one engine-run group", "[config]") {
  const SuiteConfig suite = two_by_two();
  using Groups = std::vector<std::pair<std::size_t, std::size_t>>;
  CHECK(engine_run_groups(plan_cases(suite, "")) == Groups{{0, 2}, {2, 4}, {4, 6}, {6, 8}});
  // The filter leaves one SoC of a pair: a group of one.
  CHECK(engine_run_groups(plan_cases(suite, "a/rag/f16|raspberry-pi-5$")) == Groups{{0, 2}, {2, 3}, {3, 4}, {4, 5}});
  CHECK(engine_run_groups({}).empty());
}

TEST_CASE("a shard is INDEX/COUNT, counted from 1, and anything else is refused naming --shard", "[config][shard]") {
  const Shard shard = parse_shard("2/5");
  CHECK(shard.index == 2);
  CHECK(shard.count == 5);
  CHECK(parse_shard("1/1").count == 1);
  for (const char* bad : {"", "2", "0/3", "4/3", "-1/3", "1/0", "a/b", "1/2/3", "1/1001", " 1/2", "1/2x"}) {
    INFO(bad);
    try {
      parse_shard(bad);
      FAIL("accepted");
    } catch (const kv::InputError& e) {
      CHECK(e.where() == "--shard");
    }
  }
}

TEST_CASE("shards take every group once, the heaviest first to the lightest shard, the same every time", "[config][shard]") {
  const std::vector<double> weights = {5.0, 1.0, 9.0, 3.0, 3.0, 7.0, 2.0, 0.0, 4.0};
  for (int count : {1, 2, 3, 4, 9, 12}) {
    INFO("count " << count);
    const std::vector<int> shard_of = assign_shards(weights, count);
    REQUIRE(shard_of.size() == weights.size());
    CHECK(assign_shards(weights, count) == shard_of);
    std::vector<double> load(static_cast<std::size_t>(count), 0.0);
    for (std::size_t g = 0; g < weights.size(); ++g) {
      REQUIRE(shard_of[g] >= 0);
      REQUIRE(shard_of[g] < count);
      load[static_cast<std::size_t>(shard_of[g])] += weights[g];
    }
    // Greedy on sorted weights: no shard exceeds another by more than the heaviest group.
    const auto [lightest, heaviest] = std::minmax_element(load.begin(), load.end());
    CHECK(*heaviest - *lightest <= 9.0);
  }
  // Three shards of 9 5 7 4 3 3 2 1 0: 9 | 7 3 | 5 4 ... balanced to within one small group.
  const std::vector<int> three = assign_shards(weights, 3);
  std::vector<double> load(3, 0.0);
  for (std::size_t g = 0; g < weights.size(); ++g) load[static_cast<std::size_t>(three[g])] += weights[g];
  CHECK(*std::max_element(load.begin(), load.end()) - *std::min_element(load.begin(), load.end()) <= 2.0);
  CHECK(three[2] == 0);  // the heaviest group goes first, to shard 0
}

TEST_CASE("a shard plan's hash names the assignment: another assignment or count is another hash", "[config][shard]") {
  const SuiteConfig suite = two_by_two();
  const std::vector<PlannedCase> cases = plan_cases(suite, "");
  const auto groups = engine_run_groups(cases);
  std::vector<int> shard_of(groups.size(), 0);
  shard_of.back() = 1;
  const std::string hash = shard_plan_hash(cases, groups, shard_of, 2);
  CHECK(hash.size() == 16);
  CHECK(shard_plan_hash(cases, groups, shard_of, 2) == hash);
  CHECK(shard_plan_hash(cases, groups, shard_of, 3) != hash);
  shard_of.front() = 1;
  CHECK(shard_plan_hash(cases, groups, shard_of, 2) != hash);
}
