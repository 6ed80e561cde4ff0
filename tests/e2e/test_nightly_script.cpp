// End to end: ci/nightly.sh on a temporary database. The first night passes and becomes the
// baseline; a worse night fails the gate and writes JUnit, Markdown, JSON and the HTML report; the example
// workflow is valid YAML.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "e2e/e2e_support.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

std::string suite(const std::string& budget, const std::string& extra, int repetitions) {
  return R"({"name": "nightly-test", "repetitions": )" + std::to_string(repetitions) + R"(, "warmup": 1, "noise_threshold": 1.0,
    "models": [{"name": "syn-7b", "backend": "synthetic", "preset": "llama-7b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag-2k", "kind": "rag", "context_tokens": 2048, "gen_tokens": 16}],
    "policies": [{"name": "q4-hybrid", "k": "q4", "v": "q4", "residual_tokens": 64,
                  "sparse": {"selector": "hybrid", "budget": )" + budget + R"(, "sample_every": 4})" + extra + "}]}";
}

int nightly(const std::string& args) {
  const std::string command = "KVBENCH=" + std::string(KVBENCH_BIN) + " bash " + KVBENCH_SOURCE_DIR + "/ci/nightly.sh " + args + " >/dev/null 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void two_nights(const std::string& worse_budget, const std::string& worse_extra, int repetitions) {
  const kvtest::TempDir dir("kvbench-e2e-nightly");
  const std::string db = dir.path + "/results.sqlite", out = dir.path + "/reports";
  const std::string first = dir.path + "/first.json", second = dir.path + "/second.json";
  kvtest::write_file(first, suite("0.25", "", repetitions));
  kvtest::write_file(second, suite(worse_budget, worse_extra, repetitions));
  const std::string common = " --db " + db + " --out " + out + " --promote";
  CHECK(nightly("--suite " + first + common) == 0);
  CHECK(kvtest::run_kvbench("baseline show nightly/main --db " + db).text.find("run 1 [complete]") != std::string::npos);
  CHECK_FALSE(fs::exists(out + "/gate.xml"));  // no gate on the first night
  CHECK(kvtest::file_bytes(out + "/report/index.html").find("no baseline") != std::string::npos);
  CHECK(nightly("--suite " + second + common) == 1);
  // The report beside the gate's files shows the failing verdict.
  CHECK(kvtest::file_bytes(out + "/report/index.html").find("<p class=\"banner regressed\">") != std::string::npos);
  for (const char* file : {"gate.xml", "gate.md", "gate.json"}) {
    INFO(file);
    CHECK(fs::file_size(out + "/" + file) > 100);
  }
  CHECK(kvtest::file_bytes(out + "/gate.md").rfind("**kvbench gate: FAIL**", 0) == 0);
  // A failing night does not move the baseline.
  CHECK(kvtest::run_kvbench("baseline show nightly/main --db " + db).text.find("run 1 [complete]") != std::string::npos);
  CHECK(nightly("--bogus") == 2);
}

}  // namespace

TEST_CASE("ci/nightly.sh: a first night becomes the baseline, a tighter budget the next night fails", "[e2e][nightly]") {
  two_nights("0.10", "", 3);
}

// Timed: run alone by ci/test.sh with the other [gate-timed] tests.
TEST_CASE("ci/nightly.sh: a night with test_slowdown 1.0 fails the gate", "[.][gate-timed]") { two_nights("0.25", R"(, "test_slowdown": 1.0)", 8); }

TEST_CASE("the example nightly workflow is valid YAML", "[e2e][nightly]") {
  const std::string file = std::string(KVBENCH_SOURCE_DIR) + "/ci/examples/nightly.yml";
  const int status = std::system(("python3 -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); "
                                  "assert \"nightly\" in d[\"jobs\"] and d[\"jobs\"][\"nightly\"][\"steps\"]' " + file).c_str());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
