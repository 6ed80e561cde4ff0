// Every message the docs quote (`kvbench: ...` in backticks, in README.md and docs/*.md) is
// produced, word for word, by the command this test runs for it, with exit code 2. A quote
// this test does not know fails it: a new quote comes with its command here.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "e2e/e2e_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using kvtest::Output;

namespace {

std::string source(const std::string& relative) { return kvtest::read_file(std::string(KVBENCH_SOURCE_DIR) + "/" + relative); }

// The quoted messages of one page; templates (`kvbench: <file>: <reason>`) are not messages.
std::set<std::string> quoted_messages(const std::string& page) {
  std::set<std::string> quotes;
  const std::regex quote("`(kvbench: [^`]+)`");
  for (std::sregex_iterator it(page.begin(), page.end(), quote), end; it != end; ++it) {
    const std::string text = (*it)[1].str();
    if (text.find('<') == std::string::npos) quotes.insert(text);
  }
  return quotes;
}

// The README tutorial's suite (step 3), verbatim.
std::string readme_suite() {
  const std::string readme = source("README.md");
  const auto step = readme.find("### 3.");
  REQUIRE(step != std::string::npos);
  const auto begin = readme.find("```json\n", step);
  const auto end = readme.find("```", begin + 8);
  REQUIRE((begin != std::string::npos && end != std::string::npos));
  return readme.substr(begin + 8, end - begin - 8);
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// A bad suite where each quote's message comes from, written into `dir`, and the command.
struct Producer {
  std::function<void(const std::string& dir)> setup;
  std::string args;
};

std::map<std::string, Producer> producers() {
  const std::string mm_suite = R"({"name": "mm", "repetitions": 1,
    "models": [{"name": "syn-7b", "backend": "synthetic", "preset": "llama-7b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "mm-2i", "kind": "multimodal", "images": 2, "visual_tokens": 576, "context_tokens": 1024, "gen_tokens": 32}],
    "policies": [{"name": "q4-hybrid", "k": "q4", "v": "q4", "page_tokens": 64,
                  "sparse": {"selector": "hybrid", "sinks": 4, "window": 256, "budget": 0.10}}]})";
  return {
      {"kvbench: my-rag.json: /policies/1/sparse/budget: must be in (0, 1] (1.5)",
       {[](const std::string& dir) { kvtest::write_file(dir + "/my-rag.json", replaced(readme_suite(), "\"budget\": 0.10", "\"budget\": 1.5")); },
        "run --suite my-rag.json --db results.sqlite"}},
      {"kvbench: suite.json: /policies/0/sparse/budget: must be in (0, 1] (1.5)",
       {[mm_suite](const std::string& dir) { kvtest::write_file(dir + "/suite.json", replaced(mm_suite, "\"budget\": 0.10", "\"budget\": 1.5")); },
        "run --suite suite.json --db results.sqlite"}},
      {"kvbench: suite.json: /policies/0/sparse/budget: case syn-7b/mm-2i/q4-hybrid/host: budget 0.1 = 4 pages of the 36 pages at "
       "the largest decode context (2304 tokens) is at or below the 5 pinned pages: 1 sink page (4 sinks) and 4 window pages (a "
       "256-token window, pages of 64 tokens); no middle page would be selected; raise the budget, shorten the window, or set "
       "allow_pinned_only: true to run it as sinks and window only (marked degraded)",
       {[mm_suite](const std::string& dir) { kvtest::write_file(dir + "/suite.json", mm_suite); }, "run --suite suite.json --db results.sqlite"}},
      {"kvbench: --older-than: -3: not a whole number of days, 0 or more",
       {[](const std::string&) {}, "prune --older-than -3 --db results.sqlite"}},
  };
}

}  // namespace

TEST_CASE("every message the docs quote is the binary's, word for word", "[e2e][docs]") {
  std::map<std::string, std::string> quotes;  // message -> page
  for (const std::string& page : {std::string("README.md")}) {
    for (const std::string& q : quoted_messages(source(page))) quotes[q] = page;
  }
  for (const auto& entry : fs::directory_iterator(std::string(KVBENCH_SOURCE_DIR) + "/docs")) {
    if (entry.path().extension() != ".md") continue;
    const std::string page = "docs/" + entry.path().filename().string();
    for (const std::string& q : quoted_messages(source(page))) quotes[q] = page;
  }
  REQUIRE(quotes.size() >= 4);
  const auto known = producers();
  for (const auto& [message, page] : quotes) {
    INFO(page << " quotes: " << message);
    const auto it = known.find(message);
    REQUIRE(it != known.end());  // a quote with no command here
    const kvtest::TempDir dir("kvbench-e2e-docs");
    it->second.setup(dir.path);
    const Output out = kvtest::run_kvbench_in(dir.path, it->second.args);
    INFO(out.text);
    CHECK(out.status == 2);
    CHECK(out.text.find(message + "\n") != std::string::npos);
    CHECK_FALSE(fs::exists(dir.path + "/results.sqlite"));
  }
}
