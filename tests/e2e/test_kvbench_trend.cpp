// End to end through the binary: `kvbench trend` over twelve real runs whose sparse budget
// changes after the sixth finds the step in the exact figures it moves, stores it, and finds
// none in a figure that did not move; over three, it shows each run's tags and marks the run
// whose case configuration differs from the one before.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "e2e/e2e_support.h"
#include "test_support.h"

using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql_value;

namespace {

std::string trend_suite(const std::string& budget) {
  return R"({"name": "trend", "repetitions": 1, "warmup": 0,
    "models": [{"name": "syn-7b", "backend": "synthetic", "preset": "llama-7b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag-1k", "kind": "rag", "context_tokens": 1024, "gen_tokens": 8}],
    "policies": [{"name": "q4-hybrid", "k": "q4", "v": "q4", "sparse": {"selector": "hybrid", "window": 64, "budget": )" + budget + R"(}}]})";
}

}  // namespace

TEST_CASE("kvbench trend finds the night a figure stepped and stores it", "[e2e][whole-runs][trend]") {
  const kvtest::TempDir dir("kvbench-e2e-trend");
  const std::string db = dir.path + "/results.sqlite";
  const std::string wide = dir.path + "/wide.json", narrow = dir.path + "/narrow.json";
  kvtest::write_file(wide, trend_suite("0.5"));
  kvtest::write_file(narrow, trend_suite("0.2"));
  for (int night = 1; night <= 12; ++night) {
    const Output out = run_kvbench("run --suite " + (night <= 6 ? wide : narrow) + " --db " + db + " --json");
    INFO(out.text);
    REQUIRE(out.status == 0);
  }
  Output out = run_kvbench("trend --metric token_drop_ratio --db " + db + " --format json");
  INFO(out.text);
  REQUIRE(out.status == 0);
  const auto doc = nlohmann::json::parse(out.text);
  REQUIRE(doc.size() == 1);
  REQUIRE(doc[0]["runs"].size() == 12);
  REQUIRE(doc[0]["change_points"].size() == 1);
  CHECK(doc[0]["change_points"][0]["run_id"] == 7);
  CHECK(doc[0]["change_points"][0]["after"].get<double>() > doc[0]["change_points"][0]["before"].get<double>());
  CHECK(sql_value(db, "SELECT run_id || ' ' || metric FROM change_points") == "7 token_drop_ratio");
  // The table marks the run; a figure that did not move has no change point.
  out = run_kvbench("trend --metric token_drop_ratio --suite trend --last 12 --db " + db);
  CHECK(out.text.find("  <- change: ") != std::string::npos);
  out = run_kvbench("trend --metric kv_bytes_per_token --db " + db + " --format json");
  CHECK(nlohmann::json::parse(out.text)[0]["change_points"].empty());
  // The same history gives the same answer.
  CHECK(run_kvbench("trend --metric token_drop_ratio --db " + db + " --format json").text == run_kvbench("trend --metric token_drop_ratio --db " + db + " --format json").text);
  CHECK(sql_value(db, "SELECT count(*) FROM change_points WHERE metric = 'token_drop_ratio'") == "1");
  // Bad input.
  CHECK(run_kvbench("trend --metric nope --db " + db).status == 2);
  CHECK(run_kvbench("trend --metric ttft_ms --suite other --db " + db).status == 2);
  CHECK(run_kvbench("trend --metric ttft_ms --case 'none/*' --db " + db).status == 2);
}

TEST_CASE("kvbench trend shows each run's tags and marks a run whose case configuration differs from the run before", "[e2e][trend]") {
  const kvtest::TempDir dir("kvbench-e2e-trend-tags");
  const std::string db = dir.path + "/results.sqlite";
  const std::string wide = dir.path + "/wide.json", narrow = dir.path + "/narrow.json";
  kvtest::write_file(wide, trend_suite("0.5"));
  kvtest::write_file(narrow, trend_suite("0.2"));
  const std::vector<std::string> nights = {wide + " --tag night-1 --tag main", wide, narrow + " --tag night-3"};
  for (const std::string& night : nights) {
    const Output out = run_kvbench("run --suite " + night + " --db " + db + " --json");
    INFO(out.text);
    REQUIRE(out.status == 0);
  }
  Output out = run_kvbench("trend --metric kv_bytes_per_token --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
  const auto lines = kvtest::lines_of(out.text);
  const auto line_of = [&](const std::string& start) {
    for (const std::string& line : lines) {
      if (line.rfind(start, 0) == 0) return line;
    }
    return std::string();
  };
  CHECK_THAT(line_of("  run     1 "), Catch::EndsWith("  night-1,main"));
  CHECK_THAT(line_of("  run     2 "), Catch::EndsWith("  -"));
  CHECK_THAT(line_of("  run     3* "), Catch::EndsWith("  night-3"));
  CHECK(line_of("  run     2*").empty());
  CHECK(line_of("  * run 3: the case's configuration differs from run 2's: policies.sparse.budget: 0.5 -> 0.2") ==
        "  * run 3: the case's configuration differs from run 2's: policies.sparse.budget: 0.5 -> 0.2");
  out = run_kvbench("trend --metric kv_bytes_per_token --db " + db + " --format json");
  INFO(out.text);
  REQUIRE(out.status == 0);
  const auto runs = nlohmann::json::parse(out.text)[0]["runs"];
  REQUIRE(runs.size() == 3);
  CHECK(runs[0]["tags"] == nlohmann::json({"night-1", "main"}));
  CHECK(runs[0]["config_changes"].empty());
  CHECK(runs[1]["config_changes"].empty());
  CHECK(runs[2]["config_changes"] == nlohmann::json({"policies.sparse.budget: 0.5 -> 0.2"}));
  // --last keeps the newest: run 3's mark still compares it with run 2.
  out = run_kvbench("trend --metric kv_bytes_per_token --last 2 --db " + db);
  CHECK(out.text.find("  * run 3: the case's configuration differs from run 2's") != std::string::npos);
  out = run_kvbench("trend --metric kv_bytes_per_token --last 1 --db " + db);
  CHECK(out.text.find("* run") == std::string::npos);
}
