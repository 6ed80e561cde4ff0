// A sparse budget that keeps no middle page at a case's largest decode context (it is at or
// below the sink and window pages) is refused before anything is written, naming the pages
// each part takes; with allow_pinned_only the case runs and is marked degraded with the same
// words. `run --check` makes the same checks and writes nothing; every suite kvbench ships
// passes it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "e2e/e2e_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql_value;

namespace {

// Two images of 576 tokens, 1024 text tokens and two 32-token answers: 2304 tokens at the last
// decode step, 36 pages of 64. 4 sinks and a 256-token window pin 1 + 4 pages; 10% is 4 pages.
std::string multimodal_suite(const std::string& sparse_extra) {
  return R"({"name": "mm", "repetitions": 1, "warmup": 0,
    "models": [{"name": "m", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "mm-2i", "kind": "multimodal", "images": 2, "visual_tokens": 576, "context_tokens": 1024, "gen_tokens": 32}],
    "policies": [{"name": "q4-hybrid", "k": "q4", "v": "q4", "page_tokens": 64,
                  "sparse": {"selector": "hybrid", "sinks": 4, "window": 256, "budget": 0.10)" +
         sparse_extra + R"(}}]})";
}

// Text with every run of white space made one space (the summary wraps its lines to the terminal).
std::string squeezed(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool space = c == ' ' || c == '\n';
    if (!space) out += c;
    else if (!out.empty() && out.back() != ' ') out += ' ';
  }
  return out;
}

const char* kPinned =
    "budget 0.1 = 4 pages of the 36 pages at the largest decode context (2304 tokens) is at or below the 5 pinned pages: 1 sink "
    "page (4 sinks) and 4 window pages (a 256-token window, pages of 64 tokens); no middle page would be selected";

}  // namespace

TEST_CASE("a sparse budget at or below the pinned pages is refused, and nothing is written", "[e2e]") {
  const kvtest::TempDir dir("kvbench-e2e-pinned");
  const std::string db = dir.path + "/results.sqlite";
  // A database with a run in it: the refusal must leave its bytes as they were.
  const std::string ok = dir.path + "/ok.json";
  kvtest::write_file(ok, multimodal_suite("").replace(multimodal_suite("").find("\"window\": 256"), 13, "\"window\": 64"));
  REQUIRE(run_kvbench("run --suite " + ok + " --db " + db).status == 0);
  kvtest::sql(db, "PRAGMA wal_checkpoint(TRUNCATE)");
  const std::string before = kvtest::read_file(db);

  const std::string suite = dir.path + "/mm.json";
  kvtest::write_file(suite, multimodal_suite(""));
  for (const char* flags : {"", " --check"}) {
    const Output out = run_kvbench("run --suite " + suite + " --db " + db + flags);
    INFO(out.text);
    CHECK(out.status == 2);
    CHECK(out.text.find(suite + ": /policies/0/sparse/budget: case m/mm-2i/q4-hybrid/host: " + kPinned) != std::string::npos);
    CHECK(out.text.find("set allow_pinned_only: true") != std::string::npos);
    CHECK(kvtest::read_file(db) == before);
    CHECK(sql_value(db, "SELECT count(*) FROM runs") == "1");
  }
  // The same in pages.
  kvtest::write_file(suite, multimodal_suite("").replace(multimodal_suite("").find("\"budget\": 0.10"), 14, "\"budget_pages\": 5"));
  const Output pages = run_kvbench("run --suite " + suite + " --db " + db);
  INFO(pages.text);
  CHECK(pages.status == 2);
  CHECK(pages.text.find("/policies/0/sparse/budget_pages: case m/mm-2i/q4-hybrid/host: budget_pages 5 of the 36 pages") !=
        std::string::npos);
  CHECK(kvtest::read_file(db) == before);
  // One page more than the pinned ones selects a middle page: it runs.
  kvtest::write_file(suite, multimodal_suite("").replace(multimodal_suite("").find("\"budget\": 0.10"), 14, "\"budget_pages\": 6"));
  CHECK(run_kvbench("run --check --suite " + suite + " --db " + db).status == 0);
}

TEST_CASE("allow_pinned_only runs the case and marks it degraded with the pages each part takes", "[e2e]") {
  const kvtest::TempDir dir("kvbench-e2e-pinned-allowed");
  const std::string db = dir.path + "/results.sqlite";
  const std::string suite = dir.path + "/mm.json";
  kvtest::write_file(suite, multimodal_suite(R"(, "allow_pinned_only": true)"));
  const Output check = run_kvbench("run --check --suite " + suite + " --db " + db);
  INFO(check.text);
  CHECK(check.status == 0);
  CHECK(check.text.find("1 case passes every check (0 would be skipped, 1 would run degraded)") != std::string::npos);
  CHECK(check.text.find(std::string("m/mm-2i/q4-hybrid/host degraded: sinks and window only (allow_pinned_only): ") + kPinned) !=
        std::string::npos);
  CHECK_FALSE(fs::exists(db));

  const Output out = run_kvbench("run --suite " + suite + " --db " + db + " --json");
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK(out.text.find("\"degraded\":1") != std::string::npos);
  CHECK(sql_value(db, "SELECT count(*) FROM events WHERE kind = 'pinned_only'") == "1");
  CHECK(sql_value(db, "SELECT json_extract(data, '$.text') FROM events WHERE kind = 'pinned_only'") == kPinned);
  CHECK(sql_value(db, "SELECT json_extract(config_json, '$.policies[0].sparse.allow_pinned_only') FROM runs") == "1");
  const Output show = run_kvbench("show 1 --db " + db);
  INFO(show.text);
  CHECK(show.status == 0);
  CHECK(squeezed(show.text).find(std::string("sinks and window only (allow_pinned_only): ") + kPinned) != std::string::npos);
  // It did attend over sinks and window only: its exact figures are the window selector's.
  std::string window = multimodal_suite("");
  window.replace(window.find("\"hybrid\", \"sinks\": 4, \"window\": 256, \"budget\": 0.10"), 51, "\"window\", \"sinks\": 4, \"window\": 256");
  kvtest::write_file(suite, window);
  REQUIRE(run_kvbench("run --suite " + suite + " --db " + db).status == 0);
  const std::string recall = "SELECT printf('%.17g', value) FROM metric_values WHERE name = 'attn_mass_recall' AND run_id = ";
  CHECK(sql_value(db, recall + "1") == sql_value(db, recall + "2"));
  CHECK(std::stod(sql_value(db, recall + "1")) < 1.0);
}

TEST_CASE("every suite kvbench ships passes run --check, which writes nothing", "[e2e]") {
  const kvtest::TempDir dir("kvbench-e2e-check");
  std::vector<std::string> suites = {"smoke", "nightly", "accuracy", "soc-reference", "prefix"};
  for (const auto& entry : fs::directory_iterator(std::string(KVBENCH_SOURCE_DIR) + "/bench/suites")) {
    if (entry.path().extension() == ".json") suites.push_back(entry.path().string());
  }
  REQUIRE(suites.size() >= 8);
  const std::string db = dir.path + "/results.sqlite";
  // Without the fetched models (a directory that does not exist), accuracy's stories15M cases
  // (2 workloads x 11 policies) are the only ones skipped, each saying where to get the model.
  const kvtest::ScopedEnv fetched("KVBENCH_FETCHED_MODELS_DIR", dir.path + "-no-fetched-models");
  for (const std::string& suite : suites) {
    const Output out = run_kvbench("run --check --suite " + suite + " --models-dir " + std::string(KVBENCH_MODELS_DIR) + " --db " + db);
    INFO(suite << ": " << out.text);
    CHECK(out.status == 0);
    const int skipped = suite == "accuracy" ? 22 : 0;
    CHECK(out.text.find("every check (" + std::to_string(skipped) + " would be skipped, 0 would run degraded); nothing was run or written") !=
          std::string::npos);
    std::size_t reasons = 0;
    for (std::size_t at = out.text.find("(models/fetch.sh fetches it)"); at != std::string::npos;
         at = out.text.find("(models/fetch.sh fetches it)", at + 1)) {
      ++reasons;
    }
    CHECK(reasons == static_cast<std::size_t>(skipped));
  }
  CHECK(fs::is_empty(dir.path));
}

TEST_CASE("sinks and a window that cover the whole context are refused: the case would be full attention", "[e2e]") {
  const kvtest::TempDir dir("kvbench-e2e-whole-window");
  const std::string db = dir.path + "/results.sqlite";
  const std::string suite = dir.path + "/mm.json";
  std::string text = multimodal_suite("");
  text.replace(text.find("\"window\": 256"), 13, "\"window\": 4096");
  kvtest::write_file(suite, text);
  for (const char* flags : {" --check", ""}) {
    const Output out = run_kvbench("run --suite " + suite + " --db " + db + flags);
    INFO(out.text);
    CHECK(out.status == 2);
    CHECK(out.text.find(suite + ": /policies/0/sparse/window: case m/mm-2i/q4-hybrid/host: the 1 sink page (4 sinks) and 36 window "
                                "pages (a 4096-token window, pages of 64 tokens) cover all 36 pages at the largest decode context "
                                "(2304 tokens): selector hybrid would select nothing and drop no token") != std::string::npos);
    CHECK_FALSE(fs::exists(db));
  }
  // A window that leaves a middle page is the budget's to judge: here 4 pages, below the pinned.
  text.replace(text.find("\"window\": 4096"), 14, "\"window\": 2176");
  kvtest::write_file(suite, text);
  const Output check = run_kvbench("run --check --suite " + suite + " --db " + db);
  INFO(check.text);
  CHECK(check.text.find("/sparse/window") == std::string::npos);
  CHECK(check.text.find("/policies/0/sparse/budget: case m/mm-2i/q4-hybrid/host: budget 0.1 = 4 pages of the 36 pages") != std::string::npos);
}
