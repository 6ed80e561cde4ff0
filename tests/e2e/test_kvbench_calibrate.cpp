// End to end through the binary: `kvbench calibrate` writes a host profile that loads and that
// the next run into that database prices its host cases with (and records); modelled figures
// are the same in two runs of one suite; `validate-model` sets measured and modelled side by
// side; `show --clock model` prints the modelled figures.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <filesystem>
#include <regex>
#include <string>

#include "e2e/e2e_support.h"
#include "soc_profiles.h"
#include "test_support.h"

using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql_value;
using kvtest::sql;

namespace {

// One case that seals pages, selects and swaps to L2 (a tight L1 cap).
const char* const kCalibrationSuite = R"({"name": "calib", "repetitions": 2, "warmup": 0,
    "models": [{"name": "syn-7b", "backend": "synthetic", "preset": "llama-7b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag-2k", "kind": "rag", "context_tokens": 2048, "gen_tokens": 8}],
    "policies": [{"name": "q4-tight", "k": "q4", "v": "q4", "residual_tokens": 64,
                  "sparse": {"selector": "hybrid", "budget": 0.25, "sample_every": 8},
                  "memory": {"l0_bytes": "1MiB", "l1_bytes": "68MiB", "prefetch_lookahead": 2}}]})";

}  // namespace

TEST_CASE("kvbench calibrate writes the host profile the next run uses", "[e2e][whole-runs][calibrate]") {
  const kvtest::TempDir dir("kvbench-e2e-calibrate");
  const std::string db = dir.path + "/results.sqlite", suite = dir.path + "/calib.json";
  kvtest::write_file(suite, kCalibrationSuite);
  Output out = run_kvbench("calibrate --db " + db + " --min-seconds 0.01 --quick");
  INFO(out.text);
  REQUIRE(out.status == 0);
  const std::string profile_path = dir.path + "/socs/host.json";
  CHECK(out.text.find("host profile written to " + profile_path) != std::string::npos);
  const kv::soc::SocProfile profile = kvbench::load_soc_profile("host", db);
  CHECK(profile.origin == profile_path);
  CHECK(profile.engine(kv::soc::EngineKind::Cpu).decode_gmac_per_s[4].value > 0.0);

  for (int run = 1; run <= 2; ++run) {
    out = run_kvbench("run --suite " + suite + " --db " + db + " --json");
    INFO(out.text);
    REQUIRE(out.status == 0);
  }
  const auto meta = nlohmann::json::parse(sql_value(db, "SELECT meta_json FROM runs WHERE id = 2"));
  CHECK(meta["soc_profiles"]["host"]["origin"] == profile_path);
  CHECK(meta["soc_profiles"]["host"]["hash"] == profile.hash);

  // Both clocks under one name, and the modelled figures identical across runs and repetitions.
  CHECK(sql_value(db, "SELECT count(*) FROM metric_values WHERE run_id = 2 AND name = 'tpot_ms_p50'") == "4");
  const auto modelled = [&](int run) {
    return sql(db, "SELECT repetition, name, value FROM metric_values WHERE run_id = " + std::to_string(run) +
                       " AND clock = 'model' ORDER BY repetition, name");
  };
  const auto first = modelled(1), second = modelled(2);
  REQUIRE(first.size() > 20);
  CHECK(first == second);
  CHECK(sql_value(db, "SELECT count(DISTINCT value) FROM metric_values WHERE clock = 'model' AND name = 'dma_wait_ms'") == "1");
  CHECK(sql_value(db, "SELECT value > 0 FROM metric_values WHERE run_id = 1 AND repetition = 1 AND clock = 'model'"
                   " AND name = 'energy_mj_per_token'") == "1");

  out = run_kvbench("validate-model --run latest --db " + db + " --json");
  INFO(out.text);
  REQUIRE(out.status == 0);
  const auto rows = nlohmann::json::parse(out.text);
  REQUIRE(rows.size() == 4);
  for (const auto& row : rows) {
    CHECK(row["case"] == "syn-7b/rag-2k/q4-tight/host");
    if (row["metric"] != "dma_wait_ms") CHECK(row["ratio"].get<double>() > 0.0);
  }
  out = run_kvbench("validate-model --db " + db);
  CHECK(out.text.find("span_decode_attn_compute_ms") != std::string::npos);
  // Every repetition of the latest run noisy: the medians are over all of them, and each row says so.
  sql(db, "UPDATE metrics SET noisy = 1 WHERE case_id IN (SELECT id FROM cases WHERE run_id = (SELECT max(id) FROM runs))");
  out = run_kvbench("validate-model --run latest --db " + db + " --json");
  REQUIRE(out.status == 0);
  for (const auto& row : nlohmann::json::parse(out.text)) {
    CHECK(row["note"].get<std::string>().find("every repetition noisy: measured is the median of all of them") != std::string::npos);
  }

  out = run_kvbench("show 2 --clock model --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK(out.text.find("clock model (priced by the SoC profile): ttft") != std::string::npos);
  CHECK(run_kvbench("show 2 --clock wall --db " + db).status == 2);

  // The same profile: modelled figures are gated exactly and pass; a recalibrated host prices
  // everything anew, so the modelled figures are then not comparable (and not gated).
  out = run_kvbench("compare --baseline 1 --candidate 2 --format json --all --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
  const auto same = nlohmann::json::parse(out.text);
  CHECK(same["cases"][0]["not_comparable"] == "");
  CHECK(out.text.find("tpot_ms_p50@model") != std::string::npos);
  REQUIRE(run_kvbench("calibrate --db " + db + " --min-seconds 0.01 --quick").status == 0);
  REQUIRE(run_kvbench("run --suite " + suite + " --db " + db).status == 0);
  out = run_kvbench("compare --baseline 1 --candidate 3 --format json --all --db " + db);
  INFO(out.text);
  const auto changed = nlohmann::json::parse(out.text);
  CHECK(changed["cases"][0]["not_comparable"].get<std::string>().find("SoC profile 'host'") != std::string::npos);

  // A malformed profile stops the next run before it starts, naming the file.
  kvtest::write_file(profile_path, "{\"name\": \"host\"}");
  out = run_kvbench("run --suite " + suite + " --db " + db);
  CHECK(out.status == 2);
  CHECK(out.text.find(profile_path) != std::string::npos);
  CHECK(sql_value(db, "SELECT count(*) FROM runs") == "3");
}

TEST_CASE("kvbench calibrate refuses a missing L2 directory", "[e2e][calibrate]") {
  const kvtest::TempDir dir("kvbench-e2e-calibrate-bad");
  const Output out = run_kvbench("calibrate --out " + dir.path + "/host.json --l2-dir " + dir.path + "/none --min-seconds 0.01 --quick");
  CHECK(out.status == 2);
  CHECK(out.text.find("/none") != std::string::npos);
  CHECK(run_kvbench("calibrate --db " + dir.path + "/a.sqlite --out " + dir.path + "/b.json").status == 2);
}

TEST_CASE("kvbench calibrate refuses a target it cannot write before measuring anything", "[e2e][whole-runs][calibrate]") {
  const kvtest::TempDir dir("kvbench-e2e-calibrate-bad");
  struct Bad {
    std::string args, message;
  };
  const std::vector<Bad> cases = {
      {"--out " + dir.path, dir.path + ": --out: is a directory; give the profile's file name"},
      {"--out " + dir.path + "/no/such/host.json", dir.path + "/no/such/host.json: --out: its directory does not exist"},
      {"--db " + dir.path + "/none/results.sqlite", dir.path + "/none/results.sqlite: --db: its directory does not exist"},
  };
  for (const Bad& bad : cases) {
    // --min-seconds 10: a check that came after the measuring would take minutes, not return at once.
    const Output out = run_kvbench("calibrate " + bad.args + " --min-seconds 10 --quick");
    INFO(bad.args << ": " << out.text);
    CHECK(out.status == 2);
    CHECK(out.text.find(bad.message) != std::string::npos);
    CHECK(out.text.find("[") == std::string::npos);  // no progress line: nothing was measured
  }
  CHECK_FALSE(std::filesystem::exists(dir.path + "/l2"));
  CHECK_FALSE(std::filesystem::exists(dir.path + "/no"));
  CHECK_FALSE(std::filesystem::exists(dir.path + "/none"));
  // With --out, the default L2 directory is beside the profile, not beside the default database.
  const std::string profile = dir.path + "/host.json";
  const Output ok = run_kvbench("calibrate --out " + profile + " --min-seconds 0.01 --quick");
  INFO(ok.text);
  REQUIRE(ok.status == 0);
  CHECK(std::filesystem::exists(profile));
  CHECK(std::filesystem::is_directory(dir.path + "/l2"));
}

TEST_CASE("kvbench validate-model heads its table with the columns' names, above the first case", "[e2e][calibrate]") {
  const kvtest::TempDir dir("kvbench-e2e-validate");
  const std::string db = dir.path + "/results.sqlite", suite = dir.path + "/calib.json";
  kvtest::write_file(suite, kCalibrationSuite);
  REQUIRE(run_kvbench("run --suite " + suite + " --repetitions 1 --db " + db).status == 0);
  const Output out = run_kvbench("validate-model --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
  const auto lines = kvtest::lines_of(out.text);
  CHECK_THAT(lines.at(0), Catch::EndsWith("vs modelled with the host profile; ratio: modelled / measured"));
  CHECK(lines.at(1).empty());
  CHECK(lines.at(2) == "case");
  CHECK(std::regex_match(lines.at(3), std::regex("  metric {22,} measured {4,}modelled {3,}ratio")));
  // The rows line up under it: a case, then its metrics indented as the header is.
  CHECK(lines.at(4) == "syn-7b/rag-2k/q4-tight/host");
  CHECK(lines.at(5).rfind("  span_decode_attn_compute_ms ", 0) == 0);
  CHECK(lines.at(5).size() >= lines.at(3).size());
}
