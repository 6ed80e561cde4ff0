// The case plan (case_plan.h): which cases a suite's run takes and in what order, with nothing
// loaded or run.
#include <catch2/catch.hpp>

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
