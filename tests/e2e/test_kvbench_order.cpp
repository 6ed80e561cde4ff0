// Exact and modelled figures do not depend on what ran before them: a suite's cases run in its
// order, in the reverse order, and each alone in a fresh process give every exact and modelled
// row bit for bit the same. A difference is a defect (state one case leaves to the next), never
// noise.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "e2e/e2e_support.h"
#include "test_support.h"

using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql;

namespace {

// stories260K role-play and rag through the llama backend, and a synthetic case with sparse
// selection and an L1 cap, each list in the order given.
std::string suite(bool reversed) {
  std::vector<std::string> models = {
      R"({"name": "stories260k", "backend": "llama", "path": "stories260K.bin", "tokenizer": "tok512.bin"})",
      R"({"name": "syn-0.5b", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1})"};
  std::vector<std::string> workloads = {
      R"({"name": "roleplay-3t", "kind": "roleplay", "turns": 3, "context_tokens": 320, "user_tokens": 40, "gen_tokens": 24, "models": ["stories260k"]})",
      R"({"name": "rag-256", "kind": "rag", "context_tokens": 256, "gen_tokens": 16})"};
  std::vector<std::string> policies = {
      R"({"name": "q4", "k": "q4", "v": "q4", "page_tokens": 16, "v_group": 16, "sparse": {"selector": "full", "sample_every": 4}})",
      R"({"name": "q8-hybrid", "k": "q8", "v": "q8", "page_tokens": 16, "v_group": 16,
          "sparse": {"selector": "hybrid", "sinks": 4, "window": 32, "budget": 0.5, "sample_every": 4}})"};
  if (reversed) {
    for (auto* list : {&models, &workloads, &policies}) std::reverse(list->begin(), list->end());
  }
  const auto join = [](const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
    return out;
  };
  return R"({"name": "order", "repetitions": 1, "warmup": 0, "models": [)" + join(models) + R"(], "workloads": [)" + join(workloads) +
         R"(], "policies": [)" + join(policies) + "]}";
}

// case/name@clock -> the value's text (17 significant digits: bit for bit) or its NULL reason.
std::map<std::string, std::string> exact_rows(const std::string& db, const std::string& run_filter) {
  std::map<std::string, std::string> rows;
  for (const auto& r : sql(db, "SELECT case_name, name, clock, coalesce(printf('%.17g', value), 'NULL ' || na_reason) FROM metric_values"
                               " WHERE clock IN ('exact', 'model') AND name != 'peak_rss_bytes' AND " + run_filter)) {
    rows[r[0] + " " + r[1] + "@" + r[2]] = r[3];
  }
  return rows;
}

}  // namespace

TEST_CASE("exact and modelled rows are the same in the suite's order, reversed, and each case alone", "[e2e][whole-runs][determinism]") {
  kvtest::TempDir dir("kvbench-e2e-order");
  const std::string db = dir.path + "/results.sqlite", forward = dir.path + "/forward.json", backward = dir.path + "/backward.json";
  kvtest::write_file(forward, suite(false));
  kvtest::write_file(backward, suite(true));
  for (const std::string& file : {forward, backward}) {
    const Output out = run_kvbench("run --suite " + file + " --db " + db + " --json");
    INFO(out.text);
    REQUIRE(out.status == 0);
  }
  const auto first = exact_rows(db, "run_id = 1"), second = exact_rows(db, "run_id = 2");
  REQUIRE(first.size() > 100);
  CHECK(first.size() == second.size());
  for (const auto& [key, value] : first) {
    INFO(key << " in the suite's order; reversed: " << (second.count(key) ? second.at(key) : "(none)"));
    CHECK(second.count(key) == 1);
    if (second.count(key) == 1) CHECK(second.at(key) == value);
  }
  // Each case alone, in a fresh process.
  std::vector<std::string> names;
  for (const auto& r : sql(db, "SELECT name FROM cases WHERE run_id = 1 AND status = 'complete' ORDER BY id")) names.push_back(r[0]);
  REQUIRE(names.size() >= 5);
  int run = 2;
  for (const std::string& name : names) {
    const Output out = run_kvbench("run --suite " + forward + " --filter '^" + name + "$' --db " + db + " --json");
    INFO(out.text);
    REQUIRE(out.status == 0);
    ++run;
    for (const auto& [key, value] : exact_rows(db, "run_id = " + std::to_string(run))) {
      INFO(key << " alone; in the suite: " << first.at(key));
      CHECK(first.at(key) == value);
    }
  }
}
