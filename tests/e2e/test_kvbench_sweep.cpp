// End to end through the binary: `kvbench sweep` replaces a suite's SoCs and prices every case
// on each, and `kvbench show` gives the SoCs' cases their modelled timings; `kvbench pareto`
// lists the non-dominated policies of the sweep per SoC, with the dominated ones under --all,
// as a table or JSON; bad SoC lists and objectives exit 2.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "e2e/e2e_support.h"
#include "test_support.h"

using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql_value;

namespace {

// Three policies, one of them dominated on (KV bytes per token, attention error): q8 full
// attention stores more than q4 and, with a tight budget, q4 sparse errs more than q4 full.
const char* const kSweepSuite = R"({"name": "sweep-e2e", "repetitions": 1, "warmup": 0,
    "models": [{"name": "syn-05b", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag-2k", "kind": "rag", "context_tokens": 2048, "gen_tokens": 8}],
    "policies": [{"name": "f16-full", "k": "f16", "v": "f16", "sparse": {"selector": "full", "sample_every": 4}},
                 {"name": "q4-full", "k": "q4", "v": "q4", "residual_tokens": 64, "sparse": {"selector": "full", "sample_every": 4}},
                 {"name": "q4-sparse", "k": "q4", "v": "q4", "residual_tokens": 64,
                  "sparse": {"selector": "hybrid", "window": 64, "budget": 0.10, "sample_every": 4}}]})";

}  // namespace

TEST_CASE("kvbench sweep prices a suite on the SoCs it names and pareto lists the fronts", "[e2e][sweep]") {
  const kvtest::TempDir dir("kvbench-e2e-sweep");
  const std::string db = dir.path + "/results.sqlite", suite = dir.path + "/sweep.json";
  kvtest::write_file(suite, kSweepSuite);
  Output out = run_kvbench("sweep --suite " + suite + " --socs host,raspberry-pi-5,apple-m3 --db " + db + " --json");
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK(sql_value(db, "SELECT count(*) FROM cases") == "9");
  CHECK(sql_value(db, "SELECT count(DISTINCT soc) FROM metric_values WHERE clock = 'model' AND name = 'decode_tps'") == "3");
  // The Pi's 2 MB L3 is smaller than the policies' 8 MiB L0: its cases ran again with it.
  CHECK(sql_value(db, "SELECT min(value) FROM metric_values WHERE soc = 'raspberry-pi-5' AND name = 'capacity_rerun'") == "1.0");
  CHECK(sql_value(db, "SELECT max(value) FROM metric_values WHERE soc != 'raspberry-pi-5' AND name = 'capacity_rerun'") == "0.0");
  // The log (stderr is not a terminal here) planned those runs before the first case, said each
  // repetition, and does not give a priced case the host case's duration.
  CHECK(out.text.find("kvbench: 9 cases: 6 engine runs planned (3 of them SoCs' own, expected from each case's size)") !=
        std::string::npos);
  CHECK(out.text.find("syn-05b/rag-2k/q4-full/raspberry-pi-5 repetition 1/1 with raspberry-pi-5's capacities done in ") !=
        std::string::npos);
  CHECK(out.text.find("syn-05b/rag-2k/q4-full/apple-m3 complete, priced from the host run (ETA") != std::string::npos);
  out = run_kvbench("show 1 --db " + db + " --wide");
  INFO(out.text);
  CHECK(out.text.find("priced q4-full/raspberry-pi-5: raspberry-pi-5: its L0 (2048 KiB) is smaller") != std::string::npos);
  // The SoCs' cases were never run on them: show gives their modelled timings, marked, beside
  // the host's measured ones, and says which clock each column is.
  const auto row = [](const std::string& text, const std::string& name) {
    for (const std::string& line : kvtest::lines_of(text)) {
      if (line.rfind(name + " ", 0) == 0) return line;
    }
    return std::string();
  };
  const auto dashes = [](const std::string& line) {
    std::istringstream cells(line);
    int n = 0;
    for (std::string cell; cells >> cell;) n += cell == "-" ? 1 : 0;
    return n;
  };
  const std::string modelled = row(out.text, "q4-full/apple-m3 ^");
  REQUIRE_FALSE(modelled.empty());
  CHECK_THAT(row(out.text, "q4-full/host"), !Catch::Contains("^"));
  CHECK_FALSE(row(out.text, "q4-full/host").empty());
  CHECK(out.text.find("^ modelled: a SoC's case priced from the host run, not run on that SoC") != std::string::npos);
  CHECK(out.text.find("on the rows marked ^: ttft first") != std::string::npos);
  // --clock host asks for the measured figures alone: the SoCs' rows have none.
  out = run_kvbench("show 1 --db " + db + " --wide --clock host");
  CHECK(out.text.find(" ^") == std::string::npos);
  // ttft, prefill, tpot p50 and p99 and decode: dashes where the default view has figures.
  CHECK(dashes(row(out.text, "q4-full/apple-m3")) >= dashes(modelled) + 5);
  out = run_kvbench("show 1 --db " + db + " --json");
  // Named: a range-for over a temporary's member would outlive the temporary.
  const auto shown = nlohmann::json::parse(out.text);
  for (const auto& c : shown["cases"]) {
    const bool host = c["name"].get<std::string>().find("/host") != std::string::npos;
    CHECK(c["timings"] == (host ? "host" : "model"));
    CHECK(c["metrics"]["tpot_ms_p50"]["median"].is_number());
  }

  out = run_kvbench("pareto --run latest --db " + db + " --soc apple-m3 --y attn_rel_error --z decode_tps --all");
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK(out.text.find("sweep-e2e") != std::string::npos);
  CHECK(out.text.find("syn-05b / rag-2k / apple-m3") != std::string::npos);
  CHECK(out.text.find("/ host") == std::string::npos);

  out = run_kvbench("pareto --db " + db + " --y attn_rel_error --format json --all");
  INFO(out.text);
  REQUIRE(out.status == 0);
  const auto doc = nlohmann::json::parse(out.text);
  REQUIRE(doc["groups"].size() == 3);
  for (const auto& group : doc["groups"]) {
    REQUIRE(group["points"].size() == 3);
    int front = 0;
    for (const auto& p : group["points"]) {
      front += p["front"].get<bool>() ? 1 : 0;
      // A dominated point names what dominates it, and nothing dominates a front point.
      CHECK(p["front"].get<bool>() == p["dominated_by"].empty());
    }
    CHECK(front >= 1);
    CHECK(group["objectives"][0]["better"] == "lower");
  }

  // Bad input: exit 2 with the field and the reason.
  out = run_kvbench("sweep --suite " + suite + " --socs host,nokia-3310 --db " + db);
  CHECK(out.status == 2);
  CHECK(out.text.find("nokia-3310") != std::string::npos);
  CHECK(out.text.find("unknown SoC profile") != std::string::npos);
  out = run_kvbench("sweep --suite " + suite + " --socs host,host --db " + db);
  CHECK(out.status == 2);
  CHECK(out.text.find("listed twice") != std::string::npos);
  out = run_kvbench("pareto --db " + db + " --y policy_name");
  CHECK(out.status == 2);
  CHECK(out.text.find("not a metric") != std::string::npos);
  out = run_kvbench("pareto --db " + db + " --y case_wall_ms");
  CHECK(out.status == 2);
  CHECK(out.text.find("no better direction") != std::string::npos);
  out = run_kvbench("pareto --db " + db + " --y attn_rel_error --soc apple-a17-pro");
  CHECK(out.status == 2);
  CHECK(out.text.find("has no case on this SoC") != std::string::npos);
  CHECK(sql_value(db, "SELECT count(*) FROM runs") == "1");
}
