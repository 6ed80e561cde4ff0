// The runner through its library API: whole-model budgets, the preflight minimum for L1, and
// degradation (an L2 device that fails with ENOSPC) as it reaches the store, `show` and
// `run --json`.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "memory/file_io.h"
#include "results_store.h"
#include "run_command.h"
#include "runner.h"
#include "runtime/error.h"
#include "suite_config.h"
#include "test_support.h"

using namespace kvbench;

namespace {

std::string suite_json(const std::string& workload, int sample_layers, const std::string& memory) {
  return R"({"name": "runner-test", "seed": 1, "repetitions": 1, "warmup": 0,
    "models": [{"name": "syn-7b", "backend": "synthetic", "preset": "llama-7b-gqa", "sample_layers": )" +
         std::to_string(sample_layers) + R"(}],
    "workloads": [)" + workload + R"(],
    "policies": [{"name": "q4-tight", "k": "q4", "v": "q4", "residual_tokens": 64,
      "sparse": {"selector": "hybrid", "sinks": 4, "window": 256, "budget": 0.25, "sample_every": 8},
      "memory": )" + memory + R"(}],
    "socs": ["host"]})";
}

// metric -> value (NULL as NaN) of the one case of run 1, repetition 1.
std::map<std::string, double> metrics_of(const std::string& db_path) {
  ResultsStore store(db_path);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(store.db(), "SELECT name, value FROM metric_values WHERE run_id = 1 AND repetition = 1", -1, &stmt,
                             nullptr) == SQLITE_OK);
  std::map<std::string, double> out;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    const auto* name = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    out[name] = sqlite3_column_type(stmt, 1) == SQLITE_NULL ? std::nan("") : sqlite3_column_double(stmt, 1);
  }
  sqlite3_finalize(stmt);
  return out;
}

std::string show_text(const std::string& db_path) {
  const std::string path = kvtest::temp_path("kvbench-show");
  std::FILE* out = std::fopen(path.c_str(), "w");
  REQUIRE(out != nullptr);
  ResultsCommandOptions show;
  show.db = db_path;
  show.run_id = 1;
  run_show(show, out);
  std::fclose(out);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(path);
  return text.str();
}

RunOptions quiet_options(const kvtest::TempDir& dir) {
  RunOptions options;
  options.db_path = dir.path + "/results.sqlite";
  options.progress = false;
  return options;
}

const char* const kRag4k = R"({"name": "rag-4k", "kind": "rag", "context_tokens": 4096, "gen_tokens": 8})";

}  // namespace

TEST_CASE("a whole-model L1 budget below what no demotion can free is refused before anything is written", "[runner]") {
  const kvtest::TempDir dir("kvbench-runner-min");
  const SuiteConfig suite = parse_suite(suite_json(kRag4k, 1, R"({"l1_bytes": "16MiB"})"), "tight.json", dir.path);
  RunOptions options = quiet_options(dir);
  try {
    run_suite(suite, options);
    FAIL("a 16 MiB budget for the whole 32-layer model ran");
  } catch (const kv::InputError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("tight.json") != std::string::npos);
    CHECK(what.find("/policies/0/memory/l1_bytes") != std::string::npos);
    CHECK(what.find("16.0 MiB") != std::string::npos);
    CHECK(what.find("pinned pages") != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(options.db_path));
}

TEST_CASE("a synthetic case whose generator cannot hold its script's needles is refused before anything is written", "[runner]") {
  const kvtest::TempDir dir("kvbench-runner-needles");
  // 12 images are 12 needles; qwen-0.5b's 64-channel heads hold 9 beside their other features.
  std::string text = suite_json(R"({"name": "mm", "kind": "multimodal", "images": 12, "visual_tokens": 16, "context_tokens": 4096, "gen_tokens": 2})",
                                1, "{}");
  text.replace(text.find("llama-7b-gqa"), 12, "qwen-0.5b-gqa");
  const SuiteConfig suite = parse_suite(text, "many.json", dir.path);
  RunOptions options = quiet_options(dir);
  try {
    run_suite(suite, options);
    FAIL("12 needles ran on heads that hold 9");
  } catch (const kv::InputError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("many.json") != std::string::npos);
    CHECK(what.find("/models/0/synthetic/needles") != std::string::npos);
    CHECK(what.find("syn-7b/mm/q4-tight") != std::string::npos);
    CHECK(what.find("holds at most 9") != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(options.db_path));
}

TEST_CASE("L1 budgets are the whole model's: sampled layers get their share and peaks are whole-model", "[runner]") {
  const kvtest::TempDir dir("kvbench-runner-share");
  // 96 MiB holds one layer's KV of a 4K context many times over, but not 32 layers' (q4 at 4K
  // is about 170 MB for the whole model): read per layer it would never offload.
  const std::uint64_t budget = 96ull << 20;
  const SuiteConfig suite = parse_suite(suite_json(kRag4k, 1, R"({"l1_bytes": "96MiB"})"), "share.json", dir.path);
  RunOptions options = quiet_options(dir);
  const RunSummary summary = run_suite(suite, options);
  REQUIRE(summary.status == RunStatus::Complete);
  const auto m = metrics_of(options.db_path);
  const double one_layer_kv = m.at("kv_bytes_per_token") / 32 * 4104;
  CHECK(one_layer_kv < static_cast<double>(budget) / 8);
  CHECK(m.at("swap_out_bytes") > 0);
  CHECK(m.at("peak_l1_bytes") <= static_cast<double>(budget));
  CHECK(m.at("peak_l1_bytes") > static_cast<double>(budget) / 2);  // scaled to the whole model
  CHECK(m.at("l1_overflow_events") == 0);
}

TEST_CASE("an L2 device that fails with ENOSPC degrades the run visibly: metrics, show's mark and lines, run --json",
          "[runner]") {
  const kvtest::TempDir dir("kvbench-runner-enospc");
  const SuiteConfig suite = parse_suite(suite_json(kRag4k, 1, R"({"l1_bytes": "72MiB", "prefetch_lookahead": 2})"),
                                        "enospc.json", dir.path);
  kv::FaultyFileIo io;
  io.fail_writes_after(0, ENOSPC);
  RunOptions options = quiet_options(dir);
  options.l2_io = &io;
  const RunSummary summary = run_suite(suite, options);
  // Degrading instead of stopping is the design: the run completes, but never looks clean.
  REQUIRE(summary.status == RunStatus::Complete);
  CHECK(summary.degraded == 1);
  ResultsStore store(options.db_path);
  const std::string json = run_json(summary, repetition_noise(store, summary.run_id));
  CHECK(json.find("\"degraded\":1") != std::string::npos);
  CHECK(json.find("\"noisy_repetitions\":{\"noisy\":") != std::string::npos);
  for (const char* key : {"\"run_id\"", "\"status\"", "\"db\"", "\"cases\"", "\"skipped\"", "\"failed\""}) {
    CHECK(json.find(key) != std::string::npos);
  }
  const auto m = metrics_of(options.db_path);
  CHECK(m.at("l2_errors") >= 1);
  CHECK(m.at("pressure_danger_steps") > 0);
  const std::string shown = show_text(options.db_path);
  INFO(shown);
  CHECK(shown.find("every case: model syn-7b, soc host") != std::string::npos);
  CHECK(shown.find("\nrag-4k/q4-tight !") != std::string::npos);
  CHECK(shown.find("degraded rag-4k/q4-tight (in 1 of 1 repetitions):") != std::string::npos);
  CHECK(shown.find("! degraded: the engine gave something up") != std::string::npos);
  CHECK(shown.find("L2 write failed at step") != std::string::npos);
  CHECK(shown.find("ENOSPC") != std::string::npos);
  CHECK(shown.find("layer steps at the danger watermark") != std::string::npos);
}

TEST_CASE("a clean run is not marked degraded", "[runner]") {
  const kvtest::TempDir dir("kvbench-runner-clean");
  const SuiteConfig suite = parse_suite(suite_json(kRag4k, 1, R"({"l1_bytes": "4GiB"})"), "clean.json", dir.path);
  RunOptions options = quiet_options(dir);
  const RunSummary summary = run_suite(suite, options);
  CHECK(summary.degraded == 0);
  CHECK(run_json(summary, {}).find("\"degraded\":0") != std::string::npos);
  const std::string shown = show_text(options.db_path);
  CHECK(shown.find("q4-tight !") == std::string::npos);
  CHECK(shown.find("degraded") == std::string::npos);
}

// Slow (a 64K context): run by name from ci/test.sh in the Release step.
TEST_CASE("no phase holds more than the L1 cap: a 64K codebase case with a tight whole-model budget", "[.][runner-long]") {
  const kvtest::TempDir dir("kvbench-runner-64k");
  // The 64K minimum (pins, residual, page summaries) is about 315 MB for the whole model; the
  // KV itself about 2.7 GB: the probed dense prefill chunks must stream their pages.
  const std::uint64_t budget = 384ull << 20;
  const SuiteConfig suite = parse_suite(
      suite_json(R"({"name": "codebase-64k", "kind": "codebase", "context_tokens": 65536, "gen_tokens": 16})", 1,
                 R"({"l1_bytes": "384MiB"})"),
      "tight-64k.json", dir.path);
  RunOptions options = quiet_options(dir);
  const RunSummary summary = run_suite(suite, options);
  REQUIRE(summary.status == RunStatus::Complete);
  const auto m = metrics_of(options.db_path);
  CHECK(m.at("swap_out_bytes") > 1e9);
  CHECK(m.at("peak_l1_bytes") <= static_cast<double>(budget));
  CHECK(m.at("l1_overflow_events") == 0);
}

TEST_CASE("a run writes L2 files only in a subdirectory of its own and removes it", "[runner]") {
  const kvtest::TempDir dir("kvbench-runner-l2dirs");
  const SuiteConfig suite = parse_suite(suite_json(kRag4k, 1, R"({"l1_bytes": "72MiB"})"), "l2.json", dir.path);
  // A user's directory holding another run's files: they stay, and so does the directory.
  const std::string l2 = dir.path + "/mine";
  std::filesystem::create_directory(l2);
  std::filesystem::create_directory(l2 + "/kvbench-run-1-1");
  std::ofstream(l2 + "/kvbench-run-1-1/other.seg") << "another run's page";
  RunOptions options = quiet_options(dir);
  options.l2_dir = l2;
  const RunSummary summary = run_suite(suite, options);
  REQUIRE(summary.status == RunStatus::Complete);
  CHECK(metrics_of(options.db_path).at("swap_out_bytes") > 0);
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(l2)) left.push_back(entry.path().string());
  CHECK(left == std::vector<std::string>{l2 + "/kvbench-run-1-1", l2 + "/kvbench-run-1-1/other.seg"});
  CHECK_FALSE(std::filesystem::exists(dir.path + "/l2"));  // the default one was not needed
}

TEST_CASE("an explicit L2 directory must exist and be a directory, the default one only appears when a policy offloads",
          "[runner]") {
  const kvtest::TempDir dir("kvbench-runner-l2check");
  const SuiteConfig offloading = parse_suite(suite_json(kRag4k, 1, R"({"l1_bytes": "72MiB"})"), "o.json", dir.path);
  RunOptions options = quiet_options(dir);
  options.l2_dir = dir.path + "/missing";
  CHECK_THROWS_MATCHES(run_suite(offloading, options), kv::InputError, Catch::Predicate<kv::InputError>([&](const kv::InputError& e) {
                         return e.where() == options.l2_dir && e.field() == "--l2-dir" && e.reason() == "does not exist";
                       }));
  std::ofstream(dir.path + "/file") << "x";
  options.l2_dir = dir.path + "/file";
  CHECK_THROWS_WITH(run_suite(offloading, options), Catch::Contains("is not a directory"));
  CHECK_FALSE(std::filesystem::exists(options.db_path));  // nothing written

  // No policy offloads: no L2 directory at all, even beside a database in a fresh directory.
  const SuiteConfig resident = parse_suite(suite_json(kRag4k, 1, "{}"), "r.json", dir.path);
  RunOptions plain = quiet_options(dir);
  plain.db_path = dir.path + "/fresh/results.sqlite";
  // An explicit database's directory must exist: it is not made.
  CHECK_THROWS_WITH(run_suite(resident, plain), Catch::Contains("its directory does not exist"));
  CHECK_FALSE(std::filesystem::exists(dir.path + "/fresh"));
  std::filesystem::create_directory(dir.path + "/fresh");
  REQUIRE(run_suite(resident, plain).status == RunStatus::Complete);
  CHECK_FALSE(std::filesystem::exists(dir.path + "/fresh/l2"));
}

TEST_CASE("a stop before the run starts stores nothing", "[runner]") {
  const kvtest::TempDir dir("kvbench-runner-stop");
  const SuiteConfig suite = parse_suite(suite_json(kRag4k, 1, "{}"), "s.json", dir.path);
  std::atomic<bool> stop{true};
  RunOptions options = quiet_options(dir);
  options.stop = &stop;
  CHECK_THROWS_AS(run_suite(suite, options), RunInterrupted);
  CHECK_FALSE(std::filesystem::exists(options.db_path));
}
