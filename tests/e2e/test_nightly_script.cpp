// End to end: ci/nightly.sh on a temporary database. The first night passes and becomes the
// baseline; a worse night fails the gate and writes JUnit, Markdown, JSON and the HTML report; a
// night that passes with unreliable rows, or whose benchmark definition changed (exit 6), is not
// promoted and says why; bad arguments exit 2; the example workflow is valid YAML.
#include <sqlite3.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "benchmark_definition.h"
#include "e2e/e2e_support.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

std::string suite(const std::string& budget, const std::string& extra, int repetitions) {
  return R"({"name": "nightly-test", "repetitions": )" + std::to_string(repetitions) + R"(, "warmup": 1, "noise_threshold": 1.0,
    "models": [{"name": "syn-7b", "backend": "synthetic", "preset": "llama-7b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag-2k", "kind": "rag", "context_tokens": 2048, "gen_tokens": 16}],
    "policies": [{"name": "q4-hybrid", "k": "q4", "v": "q4", "residual_tokens": 64,
                  "sparse": {"selector": "hybrid", "window": 64, "budget": )" + budget + R"(, "sample_every": 4})" + extra + "}]}";
}

// The script's exit code and everything it printed.
kvtest::Output nightly(const std::string& args) {
  const std::string log = kvtest::temp_path("nightly-log");
  const std::string command = "KVBENCH=" + std::string(KVBENCH_BIN) + " bash " + KVBENCH_SOURCE_DIR + "/ci/nightly.sh " + args + " >" + log + " 2>&1";
  const int status = std::system(command.c_str());
  kvtest::Output out;
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  out.text = kvtest::file_bytes(log);
  std::filesystem::remove(log);
  return out;
}

// The script's "not promoted: ..." line ("" when there is none).
std::string not_promoted(const std::string& text) {
  const auto at = text.find("not promoted: ");
  return at == std::string::npos ? "" : text.substr(at, text.find('\n', at) - at);
}

std::string baseline_run(const std::string& db) { return kvtest::run_kvbench("baseline show nightly/main --db " + db).text; }

void two_nights(const std::string& worse_budget, const std::string& worse_extra, int repetitions) {
  const kvtest::TempDir dir("kvbench-e2e-nightly");
  const std::string db = dir.path + "/results.sqlite", out = dir.path + "/reports";
  const std::string first = dir.path + "/first.json", second = dir.path + "/second.json";
  kvtest::write_file(first, suite("0.25", "", repetitions));
  kvtest::write_file(second, suite(worse_budget, worse_extra, repetitions));
  const std::string common = " --db " + db + " --out " + out + " --promote --sim-suite none";
  CHECK(nightly("--suite " + first + common).status == 0);
  CHECK(kvtest::run_kvbench("baseline show nightly/main --db " + db).text.find("run 1 [complete]") != std::string::npos);
  CHECK_FALSE(fs::exists(out + "/gate.xml"));  // no gate on the first night
  CHECK(kvtest::file_bytes(out + "/report/index.html").find("no baseline") != std::string::npos);
  const kvtest::Output worse = nightly("--suite " + second + common);
  INFO(worse.text);
  CHECK(worse.status == 1);
  CHECK(not_promoted(worse.text).find(" regressed") != std::string::npos);
  // The report beside the gate's files shows the failing verdict.
  CHECK(kvtest::file_bytes(out + "/report/index.html").find("<p class=\"banner regressed\">") != std::string::npos);
  for (const char* file : {"gate.xml", "gate.md", "gate.json"}) {
    INFO(file);
    CHECK(fs::file_size(out + "/" + file) > 100);
  }
  CHECK(kvtest::file_bytes(out + "/gate.md").rfind("**kvbench gate: FAIL**", 0) == 0);
  // A failing night does not move the baseline.
  CHECK(kvtest::run_kvbench("baseline show nightly/main --db " + db).text.find("run 1 [complete]") != std::string::npos);
  CHECK(nightly("--bogus").status == 2);
}

}  // namespace

TEST_CASE("ci/nightly.sh: a first night becomes the baseline, a tighter budget the next night fails", "[e2e][whole-runs][nightly]") {
  two_nights("0.10", "", 3);
}

// Timed: run alone by ci/test.sh with the other [gate-timed] tests.
TEST_CASE("ci/nightly.sh: a night with test_slowdown 1.0 fails the gate", "[.][gate-timed]") { two_nights("0.25", R"(, "test_slowdown": 1.0)", 8); }

TEST_CASE("the example nightly workflows are valid YAML", "[e2e][nightly]") {
  const std::string dir = std::string(KVBENCH_SOURCE_DIR) + "/ci/examples/";
  for (const auto& [file, jobs] : {std::pair<std::string, std::string>{"nightly.yml", "nightly"}, {"nightly-matrix.yml", "shard,gate"}, {"nightly-postgres.yml", "shard,gate"}}) {
    INFO(file);
    const int status = std::system(("python3 -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); "
                                    "assert all(d[\"jobs\"][j][\"steps\"] for j in sys.argv[2].split(\",\"))' " + dir + file + " " + jobs).c_str());
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
}

TEST_CASE("ci/nightly.sh --shards merges the shards' databases and gates the merged run", "[e2e][whole-runs][nightly]") {
  const kvtest::TempDir dir("kvbench-e2e-nightly-shards");
  const std::string db = dir.path + "/results.sqlite", out = dir.path + "/reports", file = dir.path + "/suite.json";
  const std::string shards = dir.path + "/shards";
  fs::create_directories(shards);
  kvtest::write_file(file, R"({"name": "nightly-test", "repetitions": 2, "warmup": 0, "noise_threshold": 1.0,
    "models": [{"name": "syn-7b", "backend": "synthetic", "preset": "llama-7b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag-1k", "kind": "rag", "context_tokens": 1024, "gen_tokens": 8}],
    "policies": [{"name": "f16", "k": "f16", "v": "f16"}, {"name": "q4", "k": "q4", "v": "q4"}]})");
  for (int i = 1; i <= 2; ++i) {
    const kvtest::Output shard = kvtest::run_kvbench("run --suite " + file + " --shard " + std::to_string(i) + "/2 --run-group n1 --db " +
                                                     shards + "/shard-" + std::to_string(i) + ".sqlite");
    INFO(shard.text);
    REQUIRE(shard.status == 0);
  }
  kvtest::Output night = nightly("--shards " + shards + " --db " + db + " --out " + out + " --promote --sim-suite none");
  INFO(night.text);
  CHECK(night.status == 0);
  CHECK(night.text.find("merging 2 shard databases") != std::string::npos);
  CHECK(baseline_run(db).find("run 1 [complete]") != std::string::npos);
  CHECK(kvtest::sql_value(db, "SELECT count(*) FROM cases WHERE run_id = 1") == "2");
  CHECK(fs::exists(out + "/report/index.html"));
  // An empty shard directory is bad input.
  const std::string empty = dir.path + "/empty";
  fs::create_directories(empty);
  night = nightly("--shards " + empty + " --db " + db + " --out " + out + " --sim-suite none");
  CHECK(night.status == 2);
  CHECK(night.text.find("holds no shard database") != std::string::npos);
  // The run's own flags do not go with --shards.
  night = nightly("--shards " + shards + " --suite smoke --db " + db + " --out " + out);
  CHECK(night.status == 2);
  CHECK(night.text.find("--shards: --suite belong to the shards' own runs") != std::string::npos);
  // Shards on a server are merged there; a file database has none.
  night = nightly("--run-group n1 --db " + db + " --out " + out);
  CHECK(night.status == 2);
  CHECK(night.text.find("--run-group: merges shards written straight into a PostgreSQL --db") != std::string::npos);
  night = nightly("--run-group n1 --shards " + shards + " --db postgresql:///x --out " + out);
  CHECK(night.status == 2);
  CHECK(night.text.find("--shards and --run-group") != std::string::npos);
}

TEST_CASE("ci/nightly.sh: a passing night with unreliable rows is not promoted and says why", "[e2e][whole-runs][nightly]") {
  const kvtest::TempDir dir("kvbench-e2e-nightly-plain");
  const std::string db = dir.path + "/results.sqlite", out = dir.path + "/reports", file = dir.path + "/suite.json";
  // 2 repetitions: too few for a host row to be judged, so those rows are unreliable.
  kvtest::write_file(file, suite("0.25", "", 2));
  const std::string common = " --suite " + file + " --db " + db + " --out " + out + " --promote --sim-suite none";
  REQUIRE(nightly(common).status == 0);
  REQUIRE(baseline_run(db).find("run 1 [complete]") != std::string::npos);
  kvtest::Output night = nightly(common + " --unreliable pass --inconclusive pass");
  INFO(night.text);
  CHECK(night.status == 0);
  const auto gate = nlohmann::json::parse(kvtest::file_bytes(out + "/gate.json"));
  CHECK(gate["plain_pass"] == false);
  CHECK(gate["unreliable"].get<int>() > 0);
  CHECK(not_promoted(night.text).find(std::to_string(gate["unreliable"].get<int>()) + " rows unreliable") != std::string::npos);
  CHECK(baseline_run(db).find("run 1 [complete]") != std::string::npos);
  // Under --unreliable fail the same night fails with 5, and is not promoted either.
  night = nightly(common + " --unreliable fail");
  INFO(night.text);
  CHECK(night.status == 5);
  CHECK(not_promoted(night.text).find("rows unreliable") != std::string::npos);
  CHECK(baseline_run(db).find("run 1 [complete]") != std::string::npos);
}

TEST_CASE("ci/nightly.sh --fail-on-degraded: a degraded night is gated and reported, exits 7 and is not promoted", "[e2e][whole-runs][nightly]") {
  const kvtest::TempDir dir("kvbench-e2e-nightly-degraded");
  const std::string db = dir.path + "/results.sqlite", out = dir.path + "/reports", file = dir.path + "/suite.json";
  const std::string common = " --suite " + file + " --db " + db + " --out " + out + " --promote --sim-suite none --unreliable pass";
  // A budget of sinks and window only, allowed: the case runs degraded. Without the flag that is
  // the gate's to judge: a first night, promoted.
  kvtest::write_file(file, suite("0.02, \"allow_pinned_only\": true", "", 2));
  REQUIRE(nightly(common).status == 0);
  REQUIRE(baseline_run(db).find("run 1 [complete]") != std::string::npos);
  const kvtest::Output night = nightly(common + " --fail-on-degraded");
  INFO(night.text);
  CHECK(night.status == 7);
  CHECK(night.text.find("nightly: the host run ran degraded in some case (kvbench show says what each gave up): exit 7 "
                        "(--fail-on-degraded), not promoted") != std::string::npos);
  CHECK(fs::file_size(out + "/gate.json") > 100);
  CHECK(fs::exists(out + "/report/index.html"));
  CHECK(baseline_run(db).find("run 1 [complete]") != std::string::npos);
}

TEST_CASE("ci/nightly.sh: a changed benchmark definition exits 6 and is not promoted", "[e2e][whole-runs][nightly][definition]") {
  const kvtest::TempDir dir("kvbench-e2e-nightly-definition");
  const std::string db = dir.path + "/results.sqlite", out = dir.path + "/reports", file = dir.path + "/suite.json";
  kvtest::write_file(file, suite("0.25", "", 2));
  const std::string common = " --suite " + file + " --db " + db + " --out " + out + " --promote --unreliable pass --sim-suite none";
  REQUIRE(nightly(common).status == 0);
  // The baseline as an older kvbench stored it: no benchmark_definition, version 1.
  sqlite3* handle = nullptr;
  REQUIRE(sqlite3_open(db.c_str(), &handle) == SQLITE_OK);
  CHECK(sqlite3_exec(handle, "UPDATE runs SET config_json = json_remove(config_json, '$.benchmark_definition') WHERE id = 1", nullptr,
                     nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(handle);
  const kvtest::Output night = nightly(common);
  INFO(night.text);
  CHECK(night.status == 6);
  const std::string change = "benchmark definition changed v1 -> v" + std::to_string(kvbench::kBenchmarkDefinition);
  CHECK(night.text.find("gate: needs a baseline (" + change + ")") != std::string::npos);
  CHECK(not_promoted(night.text).find("needs a baseline (" + change + ")") != std::string::npos);
  CHECK(nlohmann::json::parse(kvtest::file_bytes(out + "/gate.json"))["definition_changed"]["from"] == 1);
  CHECK(baseline_run(db).find("run 1 [complete]") != std::string::npos);
}

TEST_CASE("ci/nightly.sh: bad pass-through arguments exit 2", "[e2e][nightly]") {
  const kvtest::TempDir dir("kvbench-e2e-nightly-args");
  const std::string common = " --db " + dir.path + "/results.sqlite --out " + dir.path + "/reports";
  for (const char* args : {"--unreliable maybe", "--inconclusive", "--noise-threshold 2"}) {
    INFO(args);
    const kvtest::Output out = nightly(std::string(args) + common);
    CHECK(out.status == 2);
  }
  CHECK(nightly("--inconclusive maybe" + common).text.find("--inconclusive: 'maybe' must be pass or fail") != std::string::npos);
}

namespace {

// A sim suite small enough for a test: one 256-token prompt and 8 decode steps, counted.
std::string sim_suite() {
  return R"({"name": "nightly-sim-test", "repetitions": 1, "sim": true,
    "models": [{"name": "syn-0.5b", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag-256", "kind": "rag", "context_tokens": 256, "gen_tokens": 8}],
    "policies": [{"name": "q4", "k": "q4", "v": "q4", "page_tokens": 16, "residual_tokens": 16,
                  "sparse": {"selector": "hybrid", "budget": 0.5, "window": 32, "sample_every": 8}}]})";
}

std::string baseline_of(const std::string& db, const std::string& name) {
  return kvtest::sql_value(db, "SELECT coalesce((SELECT run_id FROM baselines WHERE name = '" + name + "'), 'none')");
}

}  // namespace

// Hidden, run alone by ci/test.sh's slow step: its host rows are compared between nights (three
// repetitions, CPU time judging the noisy wall times), which a neighbouring test could move.
TEST_CASE("ci/nightly.sh with a sim suite: noisy host rows are settled by its counted work, a noisy night never becomes the host baseline",
          "[.][nightly-sim]") {
  const kvtest::TempDir dir("kvbench-e2e-nightly-sim");
  const std::string db = dir.path + "/results.sqlite", out = dir.path + "/reports";
  const std::string host = dir.path + "/host.json", sim = dir.path + "/sim.json";
  // A device that runs hot: every host repetition starts above device.max_start_temp_c and is
  // flagged noisy, as repetitions on a busy runner are by their waits. Deterministic, unlike a
  // neighbour's load: the CPU-time rows judge the wall-time rows noise left undecided.
  const std::string temp = dir.path + "/sys/class/thermal/thermal_zone0/temp";
  fs::create_directories(fs::path(temp).parent_path());
  const kvtest::ScopedEnv sysfs("KVBENCH_SYSFS_ROOT", dir.path + "/sys");
  std::string text = suite("0.25", "", 3);
  text.replace(text.find("\"noise_threshold\": 1.0"), 22, R"("noise_threshold": 1.0, "device": {"max_start_temp_c": 45, "cool_timeout_s": 0.1})");
  kvtest::write_file(host, text);
  kvtest::write_file(sim, sim_suite());
  const std::string common = " --suite " + host + " --sim-suite " + sim + " --db " + db + " --out " + out + " --promote";
  // Night 1, hot: it passes; its sim run (2) becomes the sim baseline, its host run (1), all
  // noisy, not the host baseline.
  kvtest::write_file(temp, "80000\n");
  kvtest::Output night = nightly(common);
  INFO(night.text);
  REQUIRE(night.status == 0);
  CHECK(night.text.find("host baseline nightly/main not moved: 3 of 3 host repetitions were noisy") != std::string::npos);
  CHECK(baseline_of(db, "nightly/main") == "none");
  CHECK(baseline_of(db, "nightly/main/sim") == "2");
  CHECK(kvtest::sql_value(db, "SELECT tags FROM runs WHERE id = 2") == "nightly-sim");
  // Night 2, cool: still the host suite's first night; now quiet, it becomes the host baseline.
  kvtest::write_file(temp, "30000\n");
  night = nightly(common);
  INFO(night.text);
  REQUIRE(night.status == 0);
  CHECK(baseline_of(db, "nightly/main") == "3");
  CHECK(baseline_of(db, "nightly/main/sim") == "4");
  // Night 3, hot again: noise leaves the host's wall-time rows undecided (unreliable, or judged
  // by CPU-time rows that may themselves be inconclusive: no plain pass, which alone would not be
  // promoted); the sim gate passed and settled their spans, so the night passes and promotes its
  // sim run, and the host baseline stays on the quiet night.
  kvtest::write_file(temp, "80000\n");
  night = nightly(common);
  INFO(night.text);
  CHECK(night.status == 0);
  const auto gate = nlohmann::json::parse(kvtest::file_bytes(out + "/gate.json"));
  CHECK(gate["plain_pass"] == false);
  CHECK(gate["unreliable"].get<int>() + gate["unreliable_judged_by_cpu"].get<int>() > 0);
  // Which rows noise leaves undecided varies; the sim suite settles every one whose span it counts.
  CHECK(night.text.find("host row(s) left undecided") != std::string::npos);
  const auto sim_gate = nlohmann::json::parse(kvtest::file_bytes(out + "/gate-sim.json"));
  CHECK(sim_gate["plain_pass"] == true);
  for (const char* file : {"gate-sim.xml", "gate-sim.md"}) CHECK(fs::exists(out + "/" + file));
  CHECK(not_promoted(night.text).empty());
  CHECK(baseline_of(db, "nightly/main/sim") == "6");
  CHECK(night.text.find("host baseline nightly/main not moved: 3 of 3 host repetitions were noisy") != std::string::npos);
  CHECK(baseline_of(db, "nightly/main") == "3");
  // Without the sim suite the same night is not promoted: noise left its host rows undecided.
  night = nightly(common + " --sim-suite none --unreliable pass");
  INFO(night.text);
  CHECK(night.status == 0);
  CHECK(not_promoted(night.text).find(" unreliable") != std::string::npos);
}
