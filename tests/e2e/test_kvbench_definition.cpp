// End to end through the binary: every run stores its benchmark definition in its resolved
// configuration; a gate across definitions (a run stored before the field existed against a new
// one) stores `definition-changed`, says a new baseline is needed and exits 6, its exact rows
// not gated, and the report's banner says so; runs of one definition gate as before.
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "benchmark_definition.h"
#include "compare_command.h"
#include "e2e/e2e_support.h"
#include "test_support.h"

using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql_value;

namespace {

const char* const kDefinitionSuite = R"({"name": "definition", "repetitions": 2, "warmup": 0, "noise_threshold": 1.0,
  "models": [{"name": "syn-7b", "backend": "synthetic", "preset": "llama-7b-gqa", "sample_layers": 1}],
  "workloads": [{"name": "rag-1k", "kind": "rag", "context_tokens": 1024, "gen_tokens": 8}],
  "policies": [{"name": "q4-hybrid", "k": "q4", "v": "q4", "residual_tokens": 64,
                "sparse": {"selector": "hybrid", "window": 64, "budget": 0.25, "sample_every": 4}}]})";

// A stored run's resolved configuration rewritten in place, as an older kvbench would have left it.
void edit_config(const std::string& db, const std::string& expression, int run) {
  sqlite3* handle = nullptr;
  REQUIRE(sqlite3_open(db.c_str(), &handle) == SQLITE_OK);
  const std::string update = "UPDATE runs SET config_json = " + expression + " WHERE id = " + std::to_string(run);
  CHECK(sqlite3_exec(handle, update.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(handle);
}

}  // namespace

TEST_CASE("a gate across benchmark definitions needs a baseline: exit 6, stored, exact rows not gated", "[e2e][gate][definition]") {
  const kvtest::TempDir dir("kvbench-e2e-definition");
  const std::string db = dir.path + "/results.sqlite", suite = dir.path + "/suite.json", json_file = dir.path + "/gate.json";
  kvtest::write_file(suite, kDefinitionSuite);
  for (int run = 1; run <= 2; ++run) REQUIRE(run_kvbench("run --suite " + suite + " --db " + db + " --json").status == 0);
  CHECK(sql_value(db, "SELECT json_extract(config_json, '$.benchmark_definition') FROM runs WHERE id = 2") ==
        std::to_string(kvbench::kBenchmarkDefinition));

  // Run 1 as stored before the field existed: version 1.
  edit_config(db, "json_remove(config_json, '$.benchmark_definition')", 1);
  const std::string change = "benchmark definition changed v1 -> v" + std::to_string(kvbench::kBenchmarkDefinition);
  Output out = run_kvbench("gate --baseline 1 --candidate 2 --db " + db + " --json " + json_file);
  INFO(out.text);
  CHECK(out.status == kvbench::kExitNeedsBaseline);
  CHECK(out.text.find("gate: needs a baseline (" + change + ")") != std::string::npos);
  CHECK(out.text.find("caveat: " + change + ": set a new baseline") != std::string::npos);
  CHECK(out.text.find("config changed") == std::string::npos);
  CHECK(sql_value(db, "SELECT outcome FROM verdicts") == "definition-changed");
  const auto doc = nlohmann::json::parse(kvtest::file_bytes(json_file));
  CHECK(doc["definition_changed"] == nlohmann::json{{"from", 1}, {"to", kvbench::kBenchmarkDefinition}});
  int exact = 0;
  for (const auto& row : doc["rows"]) {
    if (row["metric"] != "kv_bytes_per_token" && row["metric"] != "ttft_ms@model") continue;
    INFO(row.dump());
    CHECK(row["verdict"] == "not gated");
    CHECK(row["note"] == change);
    ++exact;
  }
  CHECK(exact == 2);
  // The report's banner says the same, not "pass".
  out = run_kvbench("report --db " + db + " --run 2 --out " + dir.path + "/report");
  REQUIRE(out.status == 0);
  CHECK(kvtest::file_bytes(dir.path + "/report/index.html").find(">needs a baseline (benchmark definition changed v1 -&gt; v") !=
        std::string::npos);

  // compare says the same and stores nothing.
  out = run_kvbench("compare --baseline 1 --candidate 2 --format json --db " + db);
  REQUIRE(out.status == 0);
  CHECK(nlohmann::json::parse(out.text)["definition_changed"]["from"] == 1);
  CHECK(sql_value(db, "SELECT count(*) FROM verdicts") == "1");

  // The same definition on both sides: no change, nothing to set.
  edit_config(db, "json_set(config_json, '$.benchmark_definition', " + std::to_string(kvbench::kBenchmarkDefinition) + ")", 1);
  out = run_kvbench("gate --baseline 1 --candidate 2 --db " + db + " --json " + json_file);
  CHECK(out.status != kvbench::kExitNeedsBaseline);
  CHECK(out.text.find("benchmark definition") == std::string::npos);
  CHECK(nlohmann::json::parse(kvtest::file_bytes(json_file))["definition_changed"].is_null());
  CHECK(sql_value(db, "SELECT outcome FROM verdicts WHERE id = 2") != "definition-changed");
}
