// End to end through the binary: `kvbench trend` over twelve real runs whose sparse budget
// changes after the sixth finds the step in the exact figures it moves, stores it, and finds
// none in a figure that did not move.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

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
